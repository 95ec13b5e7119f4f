package s3

import (
	"errors"
	"testing"

	"github.com/scc-dev/scc/vfd"
)

// TestParseURLPrecedence: options set in code win over the URL's query,
// which wins over the AWS_* environment.
func TestParseURLPrecedence(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "http://env:1")
	t.Setenv("AWS_REGION", "env-region")
	t.Setenv("AWS_ACCESS_KEY_ID", "env-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	o := Options{Region: "code-region"}
	loc, err := ParseURL("s3://bkt/dir/file.scc?endpoint=url:2&region=url-region&insecure=1&page=65536&inflight=4", &o)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Bucket != "bkt" || loc.Key != "dir/file.scc" {
		t.Fatalf("location %+v", loc)
	}
	if o.Endpoint != "url:2" || o.Region != "code-region" || !o.Insecure || o.PageSize != 65536 || o.MaxInFlight != 4 ||
		o.AccessKey != "env-key" || o.SecretKey != "env-secret" {
		t.Fatalf("options %+v", o)
	}
	var o2 Options
	if _, err := ParseURL("s3://bkt/k", &o2); err != nil || o2.Endpoint != "http://env:1" || o2.Region != "env-region" {
		t.Fatalf("environment defaults: %+v, %v", o2, err)
	}
	host, secure, err := endpointHost(o2.Endpoint, false)
	if err != nil || host != "env:1" || secure {
		t.Fatalf("endpoint %q: %s %v %v", o2.Endpoint, host, secure, err)
	}
	for _, bad := range []string{"s3://", "s3://bkt", "s3://bkt/", "http://bkt/k", "s3://bkt/k?page=x", "s3://bkt/k?insecure=maybe"} {
		if _, err := ParseURL(bad, &Options{}); !errors.Is(err, vfd.ErrInvalid) {
			t.Errorf("%q: %v, want vfd.ErrInvalid", bad, err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{PageSize: 100}, {PageSize: 2 << 30}, {HeadSize: -1}, {HeadSize: 2 << 20},
		{MaxInFlight: -1}, {LeaseTTL: -1}, {Create: true, ReadOnly: true}} {
		if err := o.Validate(); !errors.Is(err, vfd.ErrInvalid) {
			t.Errorf("%+v: %v, want vfd.ErrInvalid", o, err)
		}
	}
	if err := (&Options{}).Validate(); err != nil {
		t.Fatal(err)
	}
}
