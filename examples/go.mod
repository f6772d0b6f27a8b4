module github.com/headway-go/headway/examples

go 1.26.0

replace github.com/headway-go/headway => ../

require (
	github.com/dunglas/httpsfv v1.1.2
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/headway-go/headway v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
