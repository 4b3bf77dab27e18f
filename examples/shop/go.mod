module github.com/idemwork/idemwork/examples/shop

go 1.26.0

require (
	github.com/idemwork/idemwork v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.13.0
)

require (
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/go-json-experiment/json v1.27.2 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.4 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)

replace github.com/idemwork/idemwork => ../..
