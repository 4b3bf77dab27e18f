package idem

// ReserveSQL is the reservation statement, for the tests of what it writes.
const ReserveSQL = reserveSQL
