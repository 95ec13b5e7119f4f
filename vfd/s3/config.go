package s3

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/scc-dev/scc/vfd"
)

// Options configure a Driver. The zero value, plus credentials and an
// endpoint from the environment, is valid; Open fills the defaults named
// below. Fields set here win over the URL's query parameters, which win over
// the AWS_* environment variables.
type Options struct {
	// Endpoint is the S3 server as host[:port] or a URL (http:// selects
	// plain HTTP). Default: the URL's endpoint= parameter, else
	// AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else s3.amazonaws.com.
	Endpoint string
	// Insecure selects plain HTTP instead of HTTPS. An http:// endpoint
	// sets it too.
	Insecure bool
	// Region: default the URL's region=, else AWS_REGION, else
	// AWS_DEFAULT_REGION, else us-east-1.
	Region string
	// AccessKey, SecretKey, SessionToken: default AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN. Both keys empty means
	// anonymous requests.
	AccessKey, SecretKey, SessionToken string

	// ReadOnly opens the file for reading: no lease is taken, and reads of
	// the head region reload the commit object, so a reader follows a
	// writer on another machine through the engine's Refresh.
	ReadOnly bool
	// Create makes a new, empty file, replacing any file at the key that no
	// writer holds (as os.O_CREATE|os.O_TRUNC). Without it the commit
	// object must exist (ErrNotFound otherwise).
	Create bool

	// PageSize is the size of one page object (FORMAT.md §19). Only Create
	// uses it; an existing file keeps its own. Default 1 MiB; at least 4 KiB.
	PageSize int64
	// HeadSize is how many leading bytes live inside the commit object
	// itself. Only Create uses it. Default 8192, the engine's
	// format.DataStart: the two superblock slots, so that the engine's
	// superblock write lands in the conditional commit PUT.
	HeadSize int64

	// MaxInFlight bounds the requests one Driver has in flight at once,
	// over all its calls. Default 16.
	MaxInFlight int
	// CoalesceGap: ReadV serves two extents of one page object with one
	// ranged GET when at most this many bytes separate them (the gap is
	// read and dropped). Default 0: only adjacent extents coalesce.
	CoalesceGap int64
	// MaxRetries is how many times a request that failed with throttling
	// (503 SlowDown), a 5xx or a network failure is sent again, with
	// exponential backoff from RetryBase (full jitter, capped at 2 s).
	// Default 6; a negative value disables retries.
	MaxRetries int
	// RetryBase is the first backoff. Default 25 ms.
	RetryBase time.Duration
	// OpTimeout bounds one request (one attempt). Default 30 s. An expiry
	// is a network failure (ErrNetwork) and is retried.
	OpTimeout time.Duration
	// LeaseTTL is how long a writer's lease outlives its last renewal
	// (FORMAT.md §19). A writer renews every LeaseTTL/3. A second writer
	// is refused with vfd.ErrLocked while the lease is live. Default 30 s.
	LeaseTTL time.Duration
	// MaxDirtyBytes bounds the memory a writer holds for pages written
	// since the last Sync: past it, the write that crossed it uploads them
	// as uncommitted page objects first (FORMAT.md §19.3). Default 64 MiB.
	MaxDirtyBytes int64
	// Transport is the HTTP transport; default a clone of
	// http.DefaultTransport with MaxIdleConnsPerHost = MaxInFlight.
	Transport http.RoundTripper
}

// Validate reports an option out of range, with vfd.ErrInvalid.
func (o *Options) Validate() error {
	switch {
	case o.PageSize != 0 && (o.PageSize < minPageSize || o.PageSize > maxPageSize):
		return fmt.Errorf("%w: s3 PageSize %d outside [%d, %d]", vfd.ErrInvalid, o.PageSize, minPageSize, maxPageSize)
	case o.HeadSize < 0 || o.HeadSize > maxHeadSize:
		return fmt.Errorf("%w: s3 HeadSize %d outside [0, %d]", vfd.ErrInvalid, o.HeadSize, maxHeadSize)
	case o.MaxInFlight < 0, o.CoalesceGap < 0, o.MaxDirtyBytes < 0, o.RetryBase < 0, o.OpTimeout < 0, o.LeaseTTL < 0:
		return fmt.Errorf("%w: negative s3 option", vfd.ErrInvalid)
	case o.Create && o.ReadOnly:
		return fmt.Errorf("%w: s3 Create and ReadOnly together", vfd.ErrInvalid)
	}
	return nil
}

const (
	minPageSize     = 4 << 10
	maxPageSize     = 1 << 30
	maxHeadSize     = 1 << 20
	defaultPageSize = 1 << 20
	defaultHeadSize = 8192
)

// withDefaults returns a copy of o with every zero field given its default.
func (o Options) withDefaults() Options {
	if o.PageSize == 0 {
		o.PageSize = defaultPageSize
	}
	if o.HeadSize == 0 {
		o.HeadSize = defaultHeadSize
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 16
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 6
	} else if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.RetryBase == 0 {
		o.RetryBase = 25 * time.Millisecond
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 30 * time.Second
	}
	if o.MaxDirtyBytes == 0 {
		o.MaxDirtyBytes = 64 << 20
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Endpoint == "" {
		o.Endpoint = "s3.amazonaws.com"
	}
	return o
}

// IsURL reports whether path names an object (s3://bucket/key) rather
// than a local file.
func IsURL(path string) bool { return strings.HasPrefix(path, "s3://") }

// Location is a parsed s3:// URL.
type Location struct {
	Bucket, Key string
}

// ParseURL parses s3://bucket/key?endpoint=host:port&region=r&insecure=1
// &page=bytes&inflight=n into the location and o, filling only the fields
// of o that are still zero, then the AWS_* environment variables.
func ParseURL(raw string, o *Options) (Location, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return Location{}, fmt.Errorf("%w: %q is not s3://bucket/key", vfd.ErrInvalid, raw)
	}
	loc := Location{Bucket: u.Host, Key: strings.TrimPrefix(u.Path, "/")}
	q := u.Query()
	setStr := func(dst *string, vals ...string) {
		for _, v := range vals {
			if *dst == "" && v != "" {
				*dst = v
			}
		}
	}
	setStr(&o.Endpoint, q.Get("endpoint"), os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"))
	setStr(&o.Region, q.Get("region"), os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))
	setStr(&o.AccessKey, os.Getenv("AWS_ACCESS_KEY_ID"))
	setStr(&o.SecretKey, os.Getenv("AWS_SECRET_ACCESS_KEY"))
	setStr(&o.SessionToken, os.Getenv("AWS_SESSION_TOKEN"))
	if v := q.Get("insecure"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Location{}, fmt.Errorf("%w: insecure=%q", vfd.ErrInvalid, v)
		}
		o.Insecure = o.Insecure || b
	}
	for name, dst := range map[string]*int64{"page": &o.PageSize, "gap": &o.CoalesceGap} {
		if v := q.Get(name); v != "" && *dst == 0 {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return Location{}, fmt.Errorf("%w: %s=%q", vfd.ErrInvalid, name, v)
			}
			*dst = n
		}
	}
	if v := q.Get("inflight"); v != "" && o.MaxInFlight == 0 {
		n, err := strconv.Atoi(v)
		if err != nil {
			return Location{}, fmt.Errorf("%w: inflight=%q", vfd.ErrInvalid, v)
		}
		o.MaxInFlight = n
	}
	return loc, nil
}

// endpointHost splits an endpoint given as a URL into host and security.
func endpointHost(ep string, insecure bool) (host string, secure bool, err error) {
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			return "", false, fmt.Errorf("%w: endpoint %q", vfd.ErrInvalid, ep)
		}
		return u.Host, u.Scheme == "https" && !insecure, nil
	}
	return ep, !insecure, nil
}
