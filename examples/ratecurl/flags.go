package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/internal/explain"
	"github.com/headway-go/headway/ratelimit"
	"github.com/headway-go/headway/redisstore"
)

const usageHead = `usage: ratecurl [flags] URL

Sends a request to URL, -n times from -c workers, through headway: requests
are paced before they are sent, 429s and 5xx are retried when that is safe
(a POST is repeated after a 5xx only with an Idempotency-Key), and the
server's Retry-After is honoured up to -max-wait.

With -n 1 the response body goes to stdout; with -n > 1 bodies are discarded
and a summary goes to stderr; -json prints one JSON summary on stdout.
ratecurl -explain < head.txt sends nothing: it reads a response head and
prints what its rate-limit headers say.
With -redis, ratecurl keeps its pacing state in Redis, so that several
ratecurl processes (on one machine or many) that call one API pace as one
client against its quota. If Redis is slow (-redis-timeout) or down, each
goes on pacing alone and returns to Redis when it answers; -v says when.

For APIs with token quotas (OpenAI, Anthropic), -cost declares what each
request costs beyond being one request, so that headway waits until the
quota in that unit has room: -cost tokens=1500, or -cost input-tokens=800
-cost output-tokens=300. A secret stays out of the command line and the
shell's history when -H names an environment variable, in single quotes:
-H 'Authorization: Bearer ${OPENAI_API_KEY}'. -body-file sends a file's
bytes as they are (a JSON request, say).

Exit status: 0 if every request ended with a response neither 429 nor 5xx,
1 otherwise, 2 on bad usage. Flags may also follow the URL.

flags:
`

// options is the parsed command line.
type options struct {
	url     string
	method  string
	header  http.Header
	host    string // from -H 'Host: ...', which net/http takes from Request.Host
	body    []byte
	hasBody bool
	cost    []cost // -cost, declared on every request

	n, c        int
	maxWait     time.Duration
	maxAttempts int
	jitter      headway.Jitter
	baseDelay   time.Duration
	maxDelay    time.Duration
	noRetry     bool
	noPace      bool
	idemKeys    bool
	timeout     time.Duration
	redis       *redis.Options // -redis, nil without
	redisURL    string
	redisWait   time.Duration // -redis-timeout
	verbose     bool
	json        bool
	explain     bool
}

// headwayOptions maps the flags onto headway's options.
func (o *options) headwayOptions() []headway.Option {
	opts := []headway.Option{
		headway.WithMaxWait(o.maxWait),
		headway.WithMaxAttempts(o.maxAttempts),
		headway.WithJitter(o.jitter),
		headway.WithBackoffDelays(o.baseDelay, o.maxDelay),
	}
	if o.noRetry {
		opts = append(opts, headway.WithoutRetries())
	}
	if o.noPace {
		opts = append(opts, headway.WithoutPacing())
	}
	if o.idemKeys {
		opts = append(opts, headway.WithIdempotencyKeys())
	}
	return opts
}

// cost is one -cost UNIT=N.
type cost struct {
	unit ratelimit.Unit
	n    int64
}

// costUnits are the units -cost takes: the ones servers meter beside
// requests.
var costUnits = []ratelimit.Unit{ratelimit.UnitTokens, ratelimit.UnitInputTokens, ratelimit.UnitOutputTokens, ratelimit.UnitContentBytes}

// parseCost parses one -cost UNIT=N.
func parseCost(v string) (cost, error) {
	u, n, ok := strings.Cut(v, "=")
	unit := ratelimit.Unit(strings.ToLower(strings.TrimSpace(u)))
	if !ok || !slices.Contains(costUnits, unit) {
		return cost{}, usagef("bad -cost %q: want UNIT=N, UNIT one of tokens, input-tokens, output-tokens, content-bytes", v)
	}
	c, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
	if err != nil || c < 0 {
		return cost{}, usagef("bad -cost %q: N must be a whole number, 0 or more", v)
	}
	return cost{unit: unit, n: c}, nil
}

// expandEnv replaces each ${NAME} in a -H value with the environment
// variable NAME, so that a secret need not be on the command line. A
// variable that is not set is an error rather than an empty credential;
// a "$" not followed by "{" is kept as it is.
func expandEnv(v string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(v, "${")
		if i < 0 {
			b.WriteString(v)
			return b.String(), nil
		}
		j := strings.IndexByte(v[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unterminated ${ in the value")
		}
		name := v[i+2 : i+j]
		if !envName(name) {
			return "", fmt.Errorf("${%s}: not an environment variable's name", name)
		}
		val, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(v[:i])
		b.WriteString(val)
		v = v[i+j+1:]
	}
}

// envName reports whether s is a portable environment variable's name.
func envName(s string) bool {
	for i, r := range s {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}

// redactRedisURL hides the password of a Redis URL, for messages.
func redactRedisURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if i := strings.LastIndex(rest, "@"); ok && i >= 0 {
		return scheme + "://xxxxx" + rest[i:]
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		return "xxxxx" + raw[i:]
	}
	return raw
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ", ") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// usageError is bad usage: ratecurl exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// parseArgs parses the command line. It returns flag.ErrHelp for -h, a
// *usageError for anything else that is wrong. stdin is read for -d @-.
func parseArgs(args []string, stdin io.Reader) (*options, error) {
	o := &options{}
	var (
		headers, data, costs stringList
		jitter, bodyFile     string
	)
	fs := flag.NewFlagSet("ratecurl", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by usageFailure
	fs.IntVar(&o.n, "n", 1, "send `N` requests")
	fs.IntVar(&o.c, "c", 1, "send from `C` concurrent workers")
	fs.StringVar(&o.method, "X", "", "request `method` (default GET, or POST with -d)")
	fs.Var(&headers, "H", "add a request `header` 'Name: value' (repeatable); ${NAME} in the value is the environment variable NAME (single-quote it)")
	fs.Var(&data, "d", "request `body`; @file reads a file, @- stdin (repeatable, joined with '&' like curl)")
	fs.StringVar(&bodyFile, "body-file", "",
		"send `FILE`'s bytes as the request body, as they are (- for stdin); Content-Type defaults to application/json when they are JSON")
	fs.Var(&costs, "cost", "declare each request's cost in a `UNIT=N` the server meters beside requests: tokens, input-tokens, output-tokens or content-bytes (repeatable)")
	fs.DurationVar(&o.maxWait, "max-wait", headway.DefaultMaxWait,
		"longest single wait before a retry; a longer Retry-After fails at once")
	fs.IntVar(&o.maxAttempts, "max-attempts", headway.DefaultMaxAttempts, "at most `N` attempts per request, the first included")
	fs.StringVar(&jitter, "jitter", headway.JitterFull.String(), "backoff `jitter`: full, equal, decorrelated or none")
	fs.DurationVar(&o.baseDelay, "base-delay", headway.DefaultBaseDelay, "backoff before the first retry, doubled for each further one")
	fs.DurationVar(&o.maxDelay, "max-delay", headway.DefaultMaxDelay, "cap of the backoff (a server's Retry-After may ask for more)")
	fs.BoolVar(&o.noRetry, "no-retry", false, "never retry: report responses and errors as they come")
	fs.BoolVar(&o.noPace, "no-pace", false, "never hold requests back before sending them")
	fs.BoolVar(&o.idemKeys, "idempotency-keys", false,
		"give each POST or PATCH its own random Idempotency-Key (the same on its retries), so it may be retried after a 5xx; -H sends one key to all")
	fs.DurationVar(&o.timeout, "timeout", 0, "overall timeout of each request, retries and body included (0: none)")
	fs.StringVar(&o.redisURL, "redis", "",
		"share the pacing state with other ratecurl processes through Redis at `URL` (redis://[user:password@]host:port[/db], or rediss://)")
	fs.DurationVar(&o.redisWait, "redis-timeout", redisstore.DefaultTimeout,
		"longest wait for Redis; past it, or with Redis down, ratecurl paces alone until Redis answers again")
	fs.BoolVar(&o.verbose, "v", false, "print a line on stderr for every retry and every finished request")
	fs.BoolVar(&o.json, "json", false, "print one JSON summary on stdout and nothing else")
	fs.BoolVar(&o.explain, "explain", false,
		"send nothing: read a raw response head (status line and headers) on stdin and print, as JSON, what its rate-limit headers say")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}

	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, &helpRequest{fs: fs}
	}
	if err != nil {
		return nil, &usageError{msg: err.Error()}
	}

	if o.explain {
		if len(pos) > 0 {
			return nil, usagef("-explain reads a response head on stdin and takes no URL, got %q", pos)
		}
		return o, nil
	}
	switch len(pos) {
	case 0:
		return nil, usagef("missing URL")
	case 1:
	default:
		return nil, usagef("want exactly one URL, got %d: %q", len(pos), pos)
	}
	if o.n < 1 {
		return nil, usagef("-n must be at least 1, got %d", o.n)
	}
	if o.c < 1 {
		return nil, usagef("-c must be at least 1, got %d", o.c)
	}
	if o.maxAttempts < 1 {
		return nil, usagef("-max-attempts must be at least 1, got %d", o.maxAttempts)
	}
	for name, d := range map[string]time.Duration{"-max-wait": o.maxWait, "-base-delay": o.baseDelay, "-max-delay": o.maxDelay} {
		if d <= 0 {
			return nil, usagef("%s must be positive, got %v", name, d)
		}
	}
	if o.timeout < 0 {
		return nil, usagef("-timeout must not be negative, got %v", o.timeout)
	}
	if o.redisWait <= 0 {
		return nil, usagef("-redis-timeout must be positive, got %v", o.redisWait)
	}
	if o.redisURL != "" {
		if o.redis, err = redis.ParseURL(o.redisURL); err != nil {
			safe := redactRedisURL(o.redisURL)
			return nil, usagef("bad -redis %q: %s", safe, strings.ReplaceAll(err.Error(), o.redisURL, safe))
		}
	}
	if o.jitter, err = headway.ParseJitter(jitter); err != nil {
		return nil, usagef("bad -jitter %q: want full, equal, decorrelated or none", jitter)
	}

	for _, c := range costs {
		cv, err := parseCost(c)
		if err != nil {
			return nil, err
		}
		o.cost = append(o.cost, cv)
	}
	if bodyFile != "" {
		if len(data) > 0 {
			return nil, usagef("-body-file and -d both give a body: use one")
		}
		if o.body, err = readData("@"+bodyFile, stdin); err != nil {
			return nil, usagef("-body-file %s%s", bodyFile, strings.TrimPrefix(err.Error(), "-d @"+bodyFile))
		}
		o.hasBody = true
	}
	if len(data) > 0 {
		parts := make([][]byte, len(data))
		for i, d := range data {
			if parts[i], err = readData(d, stdin); err != nil {
				return nil, err
			}
		}
		o.body, o.hasBody = joinData(parts), true
	}
	if o.method == "" {
		o.method = http.MethodGet
		if o.hasBody {
			o.method = http.MethodPost
		}
	}

	o.header = http.Header{}
	for _, h := range headers {
		if err := o.addHeader(h); err != nil {
			return nil, err
		}
	}
	if o.header.Get("User-Agent") == "" {
		o.header.Set("User-Agent", "ratecurl (headway)")
	}
	if o.hasBody && o.header.Get("Content-Type") == "" {
		if bodyFile != "" && json.Valid(o.body) {
			o.header.Set("Content-Type", "application/json")
		} else {
			o.header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl -d does
		}
	}

	if err := o.setURL(pos[0]); err != nil {
		return nil, err
	}
	return o, nil
}

// helpRequest is -h or -help: ratecurl prints the usage and exits 0.
type helpRequest struct{ fs *flag.FlagSet }

func (*helpRequest) Error() string { return "help requested" }

// usageFailure reports err from parseArgs and returns the exit status.
func usageFailure(err error, stderr io.Writer) int {
	var help *helpRequest
	if errors.As(err, &help) {
		help.fs.SetOutput(stderr)
		help.fs.Usage()
		return exitOK
	}
	fmt.Fprintf(stderr, "ratecurl: %v\nusage: ratecurl [flags] URL (ratecurl -h lists the flags)\n", err)
	return exitUsage
}

// parseInterspersed parses flags that may come before or after the
// positional arguments (flag stops at the first non-flag), and returns the
// positional arguments. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if endsWithTerminator(fs, args[:len(args)-len(rest)]) {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// endsWithTerminator reports whether consumed, the arguments fs.Parse just
// consumed, ended with a "--" that ended the flags, rather than with one that
// was a flag's value (-d --). It walks them as flag does, since whether an
// argument is a value depends on everything before it (-d -d --: "-d" is
// the value, the "--" ends the flags).
func endsWithTerminator(fs *flag.FlagSet, consumed []string) bool {
	for i := 0; i < len(consumed); i++ {
		switch a := consumed[i]; {
		case a == "--":
			return i == len(consumed)-1
		case takesValue(fs, a):
			i++ // skip its value, whatever it looks like
		}
	}
	return false
}

// takesValue reports whether arg is a flag, like "-d", that consumes the
// next argument as its value.
func takesValue(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	name = strings.TrimPrefix(name, "-")
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// readData returns the bytes of one -d argument.
func readData(arg string, stdin io.Reader) ([]byte, error) {
	name, isFile := strings.CutPrefix(arg, "@")
	if !isFile {
		return []byte(arg), nil
	}
	var (
		b   []byte
		err error
	)
	if name == "-" {
		if stdin == nil {
			return nil, usagef("-d @-: no standard input")
		}
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, usagef("-d %s: %v", arg, err)
	}
	return b, nil
}

func joinData(parts [][]byte) []byte {
	b := []byte{}
	for i, p := range parts {
		if i > 0 {
			b = append(b, '&')
		}
		b = append(b, p...)
	}
	return b
}

// addHeader adds one -H 'Name: value'.
func (o *options) addHeader(h string) error {
	name, value, ok := strings.Cut(h, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return usagef("bad -H %q: want 'Name: value'", h)
	}
	if !explain.IsToken(name) {
		return usagef("bad -H %q: invalid header name %q", h, name)
	}
	value, err := expandEnv(strings.TrimSpace(value), os.LookupEnv)
	if err != nil {
		// The value is not quoted: it may hold a secret.
		return usagef("bad -H for %s: %v", name, err)
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return usagef("bad -H %q: the value contains a line break or NUL", h)
	}
	if http.CanonicalHeaderKey(name) == "Host" {
		o.host = value
		return nil
	}
	o.header.Add(name, value)
	return nil
}

// setURL checks the URL and the method together: an absolute http or https
// URL with a host, and a method that is a token.
func (o *options) setURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return usagef("invalid URL %q: %v", raw, err)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return usagef("invalid URL %q: want an http:// or https:// URL", raw)
	}
	if u.Host == "" {
		return usagef("invalid URL %q: no host", raw)
	}
	if !explain.IsToken(o.method) {
		return usagef("invalid method %q", o.method)
	}
	if _, err := http.NewRequest(o.method, raw, nil); err != nil {
		return usagef("invalid request: %v", err)
	}
	o.url = raw
	return nil
}
