package snapshot

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/internal/redact"
)

// LoadURL loads a snapshot named by a URL: a store URL (as OpenStore
// takes) whose path ends in the model's name, for its newest valid
// generation, or in <model>/<generation>.msgpack for that generation:
//
//	file:///var/lib/hyperplane/clicks
//	s3://models/prod/clicks/00000000000000000042.msgpack?region=eu-west-1
//
// Credentials in the URL are hidden from its errors, as OpenStore hides
// them.
func LoadURL(ctx context.Context, rawURL string, log *zap.Logger) (_ *Snapshot, err error) {
	secrets := redact.SecretsIn(rawURL)
	defer func() { err = secrets.HideError(err) }()
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("model URL %s does not parse", redact.URLs(rawURL))
	}
	p := strings.TrimSuffix(u.Path, "/")
	var gen uint64
	if strings.HasSuffix(p, ".msgpack") {
		gen, err = strconv.ParseUint(strings.TrimSuffix(path.Base(p), ".msgpack"), 10, 64)
		if err != nil || gen == 0 {
			return nil, fmt.Errorf("model URL %s: %s is not a generation", redact.URLs(u.String()), path.Base(p))
		}
		p = path.Dir(p)
	}
	model := path.Base(p)
	if model == "" || model == "." || model == "/" {
		return nil, fmt.Errorf("model URL %s: no model name at the end of the path", redact.URLs(u.String()))
	}
	u.Path = path.Dir(p)
	if u.Path == "." {
		u.Path = ""
	}
	u.RawPath = ""
	if u.Scheme != "file" && u.Path == "/" {
		u.Path = ""
	}
	store, err := OpenStore(ctx, u.String())
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if gen > 0 {
		return store.Load(ctx, model, gen)
	}
	snap, err := store.Latest(ctx, model, log)
	if errors.Is(err, ErrNotFound) {
		if perr := store.partitionScope(ctx, model, func(seg string) string {
			c := *u
			c.Path = path.Join(u.Path, model, "partition", seg, model)
			return redact.URLs(c.String())
		}); perr != nil {
			return nil, perr
		}
	}
	return snap, err
}
