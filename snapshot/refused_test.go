package snapshot_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// TestRefused: an S3 server's refusal of the request (credentials it
// does not accept, under a code the driver does not map, as MinIO's
// InvalidAccessKeyId; a bucket that does not exist) is Refused, and a
// server that throttles, fails, or is not there is not: another attempt
// may find it answering.
func TestRefused(t *testing.T) {
	answering := func(status int, code string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, code)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	down, _ := s3test.StartDown(t)
	for _, c := range []struct {
		name     string
		endpoint string
		refused  bool
	}{
		{"invalid access key", answering(http.StatusForbidden, "InvalidAccessKeyId"), true},
		{"access denied", answering(http.StatusForbidden, "AccessDenied"), true},
		{"no such bucket", answering(http.StatusNotFound, "NoSuchBucket"), true},
		{"throttled", answering(http.StatusServiceUnavailable, "SlowDown"), false},
		{"too many requests", answering(http.StatusTooManyRequests, "TooManyRequests"), false},
		{"internal error", answering(http.StatusInternalServerError, "InternalError"), false},
		{"down", down.Endpoint, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, err := snapshot.OpenStore(context.Background(), "s3://hyperplane?region=us-east-1&use_path_style=true&endpoint="+c.endpoint)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			_, err = store.Generations(context.Background(), "m")
			if err == nil {
				t.Fatal("the store answered")
			}
			if got := snapshot.Refused(err); got != c.refused {
				t.Errorf("Refused(%v) = %v, want %v", err, got, c.refused)
			}
		})
	}
}
