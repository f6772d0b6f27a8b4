package otelheadway_test

import (
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/otelheadway"
)

// Options plugs the metrics into a headway client; any MeterProvider will
// do (otel.GetMeterProvider() in a program with a configured SDK).
func ExampleOptions() {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	opts, err := otelheadway.Options(mp)
	if err != nil {
		log.Fatal(err)
	}
	client := headway.New(append(opts, headway.WithMaxAttempts(3))...)
	fmt.Println(client.Transport != nil)
	// Output: true
}
