package e2e

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"

	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// faultyStore is a reverse proxy in front of an S3 server that can be
// switched to refuse every write (PUT, POST, DELETE) with 503 SlowDown,
// as S3 answers when it is overloaded: an error that neither the AWS SDK
// nor the worker treats as final (snapshot.Fatal), so both retry it, as
// they would during a real outage. Reads always pass.
//
// The outage can begin by itself, the moment the proxy has passed the
// first successful write of a key that matches tripOn: the test then
// knows exactly where in the history the store went down, whatever the
// machine's speed. Writes of keys that match spare pass even then.
type faultyStore struct {
	srv    *httptest.Server
	s3     s3test.Server
	tripOn *regexp.Regexp
	spare  *regexp.Regexp

	mu       sync.Mutex
	refusing bool
	tripped  string // the key whose write began the outage
	refused  int    // writes refused so far
}

// startFaultyStore starts a proxy to s3 (as s3test.Start returns it),
// which begins to refuse writes once a write of a key that matches tripOn
// succeeded (never if tripOn is nil), except those of keys that match
// spare (none if nil). The proxy keeps the request's Host header, so that
// a signature over it (MinIO checks them) still holds.
func startFaultyStore(t *testing.T, s3 s3test.Server, tripOn, spare *regexp.Regexp) *faultyStore {
	t.Helper()
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyStore{s3: s3, tripOn: tripOn, spare: spare}
	proxy := httputil.NewSingleHostReverseProxy(target)
	// A request the worker gave up on is no news.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodPut || resp.StatusCode != http.StatusOK {
			return nil
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.tripOn != nil && f.tripped == "" && f.tripOn.MatchString(resp.Request.URL.Path) {
			f.refusing, f.tripped = true, resp.Request.URL.Path
		}
		return nil
	}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut, http.MethodPost, http.MethodDelete:
			f.mu.Lock()
			refuse := f.refusing && (f.spare == nil || !f.spare.MatchString(r.URL.Path))
			if refuse {
				f.refused++
			}
			f.mu.Unlock()
			if refuse {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// url is a store URL under prefix (a key prefix in the bucket) that
// reaches the server through the proxy.
func (f *faultyStore) url(prefix string) string {
	return "s3://" + f.s3.Bucket + "/" + prefix + "?endpoint=" + f.srv.URL + "&region=us-east-1&use_path_style=true"
}

// direct is the same store as url(prefix), reached without the proxy.
func (f *faultyStore) direct(prefix string) string {
	return "s3://" + f.s3.Bucket + "/" + prefix + "?" + f.s3.Query()
}

// outage reports whether writes are refused now, the key whose write
// began the outage, and how many writes were refused so far.
func (f *faultyStore) outage() (refusing bool, tripped string, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refusing, f.tripped, f.refused
}

// heal ends the outage: writes pass again, and the proxy does not trip
// again.
func (f *faultyStore) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusing = false
	f.tripOn = nil
}
