// Package dbfacts reads what doctor and the cluster view report about the server itself,
// beside the session's own facts (store.DB.Connection, Replication): the connected node's
// replication and its standbys, and what the session's role may do.
package dbfacts
