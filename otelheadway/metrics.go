// Package otelheadway reports what headway does as OpenTelemetry metrics.
// It is a nested module, so that headway itself depends on no metrics
// library: headway's hooks (WithOnAttempt, WithOnRetry, WithOnWait,
// WithOnDone) feed the instruments.
//
//	opts, err := otelheadway.Options(otel.GetMeterProvider())
//	client := headway.New(opts...)
//
// The instruments, each with the request's key (see headway.WithKey: the
// host by default) as the attribute "headway.key":
//
//	headway.requests          counter    requests ended, by outcome: ok, http_error, rate_limited, error
//	headway.attempts          counter    attempts sent, by status class: 2xx, 3xx, 4xx, 429, 5xx, error
//	headway.throttled         counter    attempts answered 429
//	headway.retries           counter    retries decided, by reason: throttled, server_error, transport_error
//	headway.wait              histogram  seconds waited before an attempt, by layer (retry, pace) and reason
//	headway.quota.remaining   gauge      what the last response said is left, per policy (headway.policy) and unit
package otelheadway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/headway-go/headway"
)

// scope is the instrumentation scope's name.
const scope = "github.com/headway-go/headway/otelheadway"

// Attribute keys.
const (
	KeyAttr     = attribute.Key("headway.key")
	OutcomeAttr = attribute.Key("headway.outcome")
	StatusAttr  = attribute.Key("http.response.status_class")
	ReasonAttr  = attribute.Key("headway.reason")
	LayerAttr   = attribute.Key("headway.layer")
	PolicyAttr  = attribute.Key("headway.policy")
	UnitAttr    = attribute.Key("headway.unit")
)

// instruments are the metrics, made once per Options call.
type instruments struct {
	requests, attempts, throttled, retries metric.Int64Counter
	wait                                   metric.Float64Histogram
	remaining                              metric.Int64Gauge
}

// Options returns the headway options that record metrics through mp's
// meter. Pass them with any other options; hooks add up, so options of your
// own (WithOnRetry, ...) still run.
func Options(mp metric.MeterProvider) ([]headway.Option, error) {
	if mp == nil {
		return nil, errors.New("otelheadway: nil MeterProvider")
	}
	m := mp.Meter(scope)
	var ins instruments
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	ins.requests, err = m.Int64Counter("headway.requests", metric.WithDescription("Requests ended, by outcome."), metric.WithUnit("{request}"))
	add(err)
	ins.attempts, err = m.Int64Counter("headway.attempts", metric.WithDescription("Attempts sent to the server, by status class."), metric.WithUnit("{attempt}"))
	add(err)
	ins.throttled, err = m.Int64Counter("headway.throttled", metric.WithDescription("Attempts the server answered 429."), metric.WithUnit("{attempt}"))
	add(err)
	ins.retries, err = m.Int64Counter("headway.retries", metric.WithDescription("Retries decided, by reason."), metric.WithUnit("{retry}"))
	add(err)
	ins.wait, err = m.Float64Histogram("headway.wait", metric.WithDescription("Time waited before an attempt, by layer and reason."), metric.WithUnit("s"))
	add(err)
	ins.remaining, err = m.Int64Gauge("headway.quota.remaining", metric.WithDescription("What the last response said is left of a quota."), metric.WithUnit("{unit}"))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return []headway.Option{
		headway.WithOnAttempt(ins.attempt),
		headway.WithOnRetry(ins.retry),
		headway.WithOnWait(ins.paced),
		headway.WithOnDone(ins.done),
	}, nil
}

func ctxOf(r *http.Request) context.Context {
	if r == nil {
		return context.Background()
	}
	return r.Context()
}

func (ins *instruments) attempt(e headway.AttemptEvent) {
	ctx := ctxOf(e.Request)
	key := KeyAttr.String(e.Key)
	ins.attempts.Add(ctx, 1, metric.WithAttributes(key, StatusAttr.String(statusClass(e.StatusCode, e.Err))))
	if e.StatusCode == http.StatusTooManyRequests {
		ins.throttled.Add(ctx, 1, metric.WithAttributes(key))
	}
	for _, p := range e.Observation.Policies {
		if !p.HasRemaining {
			continue
		}
		name := p.Name
		if name == "" {
			name = "default"
		}
		ins.remaining.Record(ctx, p.Remaining, metric.WithAttributes(key, PolicyAttr.String(name), UnitAttr.String(string(p.Unit))))
	}
}

func (ins *instruments) retry(e headway.RetryEvent) {
	ctx := ctxOf(e.Request)
	reason := "server_error"
	switch {
	case e.Err != nil:
		reason = "transport_error"
	case e.StatusCode == http.StatusTooManyRequests:
		reason = "throttled"
	}
	key := KeyAttr.String(e.Key)
	ins.retries.Add(ctx, 1, metric.WithAttributes(key, ReasonAttr.String(reason)))
	ins.wait.Record(ctx, e.Wait.Seconds(), metric.WithAttributes(key, LayerAttr.String("retry"), ReasonAttr.String(reason)))
}

func (ins *instruments) paced(e headway.WaitEvent) {
	reason := e.Reason
	if i := strings.IndexByte(reason, ':'); i >= 0 {
		reason = reason[:i] // the kind of wait, not its figures
	}
	ins.wait.Record(ctxOf(e.Request), e.Wait.Seconds(), metric.WithAttributes(KeyAttr.String(e.Key),
		LayerAttr.String("pace"), ReasonAttr.String(reason)))
}

func (ins *instruments) done(e headway.DoneEvent) {
	outcome := "ok"
	var rle *headway.RateLimitError
	switch {
	case errors.As(e.Err, &rle):
		outcome = "rate_limited"
	case e.Err != nil:
		outcome = "error"
	case e.StatusCode >= 400:
		outcome = "http_error"
	}
	ins.requests.Add(ctxOf(e.Request), 1, metric.WithAttributes(KeyAttr.String(e.Key), OutcomeAttr.String(outcome)))
}

// statusClass names an attempt's outcome: 2xx, 3xx, 4xx, 429, 5xx or error.
func statusClass(code int, err error) string {
	switch {
	case err != nil || code == 0:
		return "error"
	case code == http.StatusTooManyRequests:
		return "429"
	default:
		return strconv.Itoa(code/100) + "xx"
	}
}
