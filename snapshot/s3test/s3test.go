// Package s3test gives tests an S3 server to write snapshots to: the
// server named by HYPERPLANE_TEST_S3_ENDPOINT (MinIO, in CI) if it is set,
// else an in-process one on loopback.
//
// The external server is configured by
//
//	HYPERPLANE_TEST_S3_ENDPOINT    http://127.0.0.1:9000
//	HYPERPLANE_TEST_S3_ACCESS_KEY  the access key
//	HYPERPLANE_TEST_S3_SECRET_KEY  the secret key
//	HYPERPLANE_TEST_S3_BUCKET      a bucket, created if it does not exist
//
// Credentials reach the store through the standard AWS environment
// variables, as they do in production, so a test that uses a Server must
// not run in parallel with others.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is an S3 bucket a test may write to.
type Server struct {
	Endpoint string
	Bucket   string
}

// Query is the part of an s3:// URL that reaches the server.
func (s Server) Query() string {
	return "endpoint=" + s.Endpoint + "&region=us-east-1&use_path_style=true"
}

// URL is a store URL under a prefix of the bucket that is new for every
// call, so that runs against a shared server stay apart.
func (s Server) URL(t testing.TB) string {
	return "s3://" + s.Bucket + "/" + Prefix(t) + "?" + s.Query()
}

// Start returns the external server if HYPERPLANE_TEST_S3_ENDPOINT is set,
// creating its bucket when missing, and otherwise starts an in-process
// one that lives as long as the test. Either way it points the AWS
// credential variables at the server and away from the developer's own
// configuration.
func Start(t testing.TB) Server {
	t.Helper()
	endpoint := os.Getenv("HYPERPLANE_TEST_S3_ENDPOINT")
	access, secret := os.Getenv("HYPERPLANE_TEST_S3_ACCESS_KEY"), os.Getenv("HYPERPLANE_TEST_S3_SECRET_KEY")
	bucket := os.Getenv("HYPERPLANE_TEST_S3_BUCKET")
	if endpoint == "" {
		return startInProcess(t, func(h http.Handler) http.Handler { return h })
	}
	if bucket == "" {
		t.Fatal("HYPERPLANE_TEST_S3_ENDPOINT is set but HYPERPLANE_TEST_S3_BUCKET is not")
	}
	if err := createBucket(endpoint, access, secret, bucket); err != nil {
		t.Fatalf("create bucket %s at %s: %v", bucket, endpoint, err)
	}
	setCredentials(t, access, secret)
	return Server{Endpoint: endpoint, Bucket: bucket}
}

// StartIgnoringConditions starts an in-process server that ignores
// If-None-Match, as some S3-compatible servers do: a store on it
// overwrites a key that should be created only if absent, and the epoch
// log's start-up probe must refuse it.
func StartIgnoringConditions(t testing.TB) Server {
	t.Helper()
	return startInProcess(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("If-None-Match")
			h.ServeHTTP(w, r)
		})
	})
}

// StartRefusing starts an in-process server that answers every request
// with 403 Access Denied, as S3 answers credentials that may not use the
// bucket: every operation of a store on it fails at once, without the
// retries a server that is down costs.
func StartRefusing(t testing.TB) Server {
	t.Helper()
	return startInProcess(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			if r.Method != http.MethodHead {
				fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
			}
		})
	})
}

// StartRefusingWrites starts an in-process server that answers every
// write (PUT, POST, DELETE) with 503 SlowDown, as S3 answers a client
// it throttles, and serves reads, until heal is called: a store on it
// is in a write outage that retries outlast.
func StartRefusingWrites(t testing.TB) (srv Server, heal func()) {
	t.Helper()
	var healed atomic.Bool
	srv = startInProcess(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodPut, http.MethodPost, http.MethodDelete:
				if !healed.Load() {
					w.Header().Set("Content-Type", "application/xml")
					w.WriteHeader(http.StatusServiceUnavailable)
					fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	return srv, func() { healed.Store(true) }
}

// StartHanging starts an in-process server that serves requests until
// hang is called, and from then on holds every request it receives
// without answering, as a stopped or hung S3 server does whose
// connections the kernel still accepts, until the client gives up or the
// test ends. held is closed when the first request is held.
func StartHanging(t testing.TB) (srv Server, hang func(), held <-chan struct{}) {
	t.Helper()
	var hanging atomic.Bool
	var once sync.Once
	first := make(chan struct{})
	stop := make(chan struct{})
	srv = startInProcess(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hanging.Load() {
				once.Do(func() { close(first) })
				select {
				case <-r.Context().Done():
				case <-stop:
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	// Registered after the server's Close, so run before it: Close
	// waits for the requests held.
	t.Cleanup(func() { close(stop) })
	return srv, func() { hanging.Store(true) }, first
}

// StartDown returns an in-process server that is down, as a stopped S3
// server is: nothing listens at its address, so every connection to it
// is refused, until up starts it there, with its bucket empty. It lives
// as long as the test.
func StartDown(t testing.TB) (srv Server, up func()) {
	t.Helper()
	addr := ClosedAddr(t)
	mem := newBucket(t)
	up = func() {
		t.Helper()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("start the S3 server at %s: %v", addr, err)
		}
		hs := &http.Server{Handler: gofakes3.New(mem).Server(), ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln) //nolint:errcheck // Close ends it
		t.Cleanup(func() { hs.Close() })
	}
	return Server{Endpoint: "http://" + addr, Bucket: inProcessBucket}, up
}

// ClosedAddr is a loopback address where nothing listens: every
// connection to it is refused.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// inProcessBucket is the bucket of every in-process server.
const inProcessBucket = "hyperplane"

// newBucket is the backend of an in-process server, holding its bucket,
// empty, with the AWS credential variables set to the server's.
func newBucket(t testing.TB) *s3mem.Backend {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket(inProcessBucket); err != nil {
		t.Fatal(err)
	}
	setCredentials(t, "test-access", "test-secret")
	return mem
}

// startInProcess serves gofakes3 on loopback through wrap, for as long as
// the test lasts.
func startInProcess(t testing.TB, wrap func(http.Handler) http.Handler) Server {
	t.Helper()
	mem := newBucket(t)
	srv := httptest.NewServer(wrap(gofakes3.New(mem).Server()))
	t.Cleanup(srv.Close)
	return Server{Endpoint: srv.URL, Bucket: inProcessBucket}
}

// setCredentials points the AWS credential variables at a server and
// away from the developer's own configuration.
func setCredentials(t testing.TB, access, secret string) {
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	// Neither the developer's ~/.aws nor the instance metadata service.
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// Prefix is a key prefix unique to this test and moment.
func Prefix(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '-'
	}, t.Name())
	return fmt.Sprintf("hyperplane-test/%s-%d", name, time.Now().UnixNano())
}

// createBucket creates bucket unless it exists already.
func createBucket(endpoint, access, secret, bucket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, ""),
	})
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if errors.As(err, &owned) || errors.As(err, &exists) {
		return nil
	}
	return err
}
