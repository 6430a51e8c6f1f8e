package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/testenv"
)

func TestOpenS3BadInput(t *testing.T) {
	s := testenv.NewS3(t)
	good := s3Options(s)
	wrongSecret := good
	wrongSecret.SecretKey = "not-the-secret-" + testenv.RandomID(8)
	wrongKey := good
	wrongKey.AccessKey = "nobody"
	cases := []struct {
		name   string
		url    string
		opts   checkpoint.Options
		want   string // in the error
		secret string // must not be in the error
	}{
		{"wrong secret", s.URL(), wrongSecret, s.URL(), wrongSecret.SecretKey},
		{"unknown access key", s.URL(), wrongKey, s.URL(), good.SecretKey},
		{"missing bucket", "s3://no-such-bucket-" + testenv.RandomID(4) + "/x", good, "does not exist", good.SecretKey},
		{"anonymous", s.URL(), checkpoint.Options{Endpoint: good.Endpoint}, s.URL(), good.SecretKey},
		{"credentials in the URL", "s3://AKID:" + good.SecretKey + "@" + s.Bucket, good, "not accepted", good.SecretKey},
		{"bad tls value", s.URL() + "?tls=maybe", good, "tls", good.SecretKey},
		{"bad endpoint scheme", s.URL(), checkpoint.Options{Endpoint: "ftp://x"}, "endpoint", good.SecretKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := checkpoint.Open(ctx, c.url, c.opts)
			if err == nil {
				t.Fatalf("Open succeeded (%v)", st)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
			if strings.Contains(err.Error(), c.secret) {
				t.Errorf("error %q reveals the secret", err)
			}
		})
	}
	// The endpoint may also ride in the URL, credentials in Options.
	ctx := context.Background()
	u := s.URL() + "?endpoint=" + s.Endpoint + "&tls=false&region=us-east-1"
	st, err := checkpoint.Open(ctx, u, checkpoint.Options{AccessKey: s.AccessKey, SecretKey: s.SecretKey})
	if err != nil {
		t.Fatalf("Open(%s): %v", u, err)
	}
	if want := "s3://" + s.Bucket + "/" + s.Prefix; st.String() != want {
		t.Errorf("String() = %q, want %q", st.String(), want)
	}
}

func TestOpenFileAndSchemes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := checkpoint.Open(ctx, "file://"+dir+"/new/sub", checkpoint.Options{})
	if err != nil {
		t.Fatalf("file store in a new directory: %v", err)
	}
	if st.String() != "file://"+dir+"/new/sub" {
		t.Errorf("String() = %q", st.String())
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		if _, err := checkpoint.Open(ctx, "file://"+ro, checkpoint.Options{}); err == nil || !strings.Contains(err.Error(), ro) {
			t.Errorf("read-only directory: %v, want an error naming it", err)
		}
	}
	for _, u := range []string{"gs://bucket/x", "file://", "::nope"} {
		if _, err := checkpoint.Open(ctx, u, checkpoint.Options{}); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		}
	}
}

func TestOptionsFromEnv(t *testing.T) {
	env := map[string]string{
		"AWS_ENDPOINT_URL":      "http://127.0.0.1:9000",
		"AWS_DEFAULT_REGION":    "eu-west-1",
		"AWS_ACCESS_KEY_ID":     "AK",
		"AWS_SECRET_ACCESS_KEY": "SK",
	}
	o := checkpoint.OptionsFromEnv(func(k string) string { return env[k] })
	if o.Endpoint != "http://127.0.0.1:9000" || o.Region != "eu-west-1" || o.AccessKey != "AK" || o.SecretKey != "SK" {
		t.Errorf("OptionsFromEnv = %+v", o)
	}
	env["AWS_ENDPOINT_URL_S3"] = "https://s3.example"
	env["AWS_REGION"] = "us-west-2"
	o = checkpoint.OptionsFromEnv(func(k string) string { return env[k] })
	if o.Endpoint != "https://s3.example" || o.Region != "us-west-2" {
		t.Errorf("specific variables should win: %+v", o)
	}
}
