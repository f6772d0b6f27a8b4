module github.com/headway-go/headway/bench

go 1.26.0

replace github.com/headway-go/headway => ../

require (
	github.com/dunglas/httpsfv v1.1.2
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-resty/resty/v2 v2.17.2
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/headway-go/headway v0.0.0-00010101000000-000000000000
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)
