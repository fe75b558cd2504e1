package avro

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// ErrUnknownSchema is wrapped by the error of a value whose schema id the
// registry does not have.
var ErrUnknownSchema = errors.New("schema id unknown to the registry")

// Registry reads Avro schemas from a Schema Registry by id, each once:
// a schema id names one schema forever, so a parsed schema is kept for
// the process's life. It is safe for concurrent use.
type Registry struct {
	cl *sr.Client

	mu   sync.Mutex
	byID map[int]avro.Schema
}

// NewRegistry returns the registry at urls, with the client options opts
// (sr.BasicAuth, sr.HTTPClient for TLS, ...). It does not contact it.
func NewRegistry(urls []string, opts ...sr.ClientOpt) (*Registry, error) {
	cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(urls...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	return &Registry{cl: cl, byID: map[int]avro.Schema{}}, nil
}

// Schema returns the Avro schema of id. A nil error means the registry
// had it and it parsed (with its references); an id the registry does not
// have wraps ErrUnknownSchema; a schema that is not Avro is an error
// naming its type. Other errors (the registry unreachable) are the
// client's, to be retried.
func (r *Registry) Schema(ctx context.Context, id int) (avro.Schema, error) {
	r.mu.Lock()
	s, ok := r.byID[id]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	got, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && (re.ErrorCode == 40403 || re.StatusCode == http.StatusNotFound) {
			return nil, fmt.Errorf("%w: %d", ErrUnknownSchema, id)
		}
		return nil, fmt.Errorf("schema registry: schema %d: %w", id, err)
	}
	if got.Type != sr.TypeAvro {
		return nil, fmt.Errorf("schema %d is %s, not Avro: only Avro values are decoded", id, got.Type)
	}
	if len(got.References) > 0 {
		return nil, fmt.Errorf("schema %d references other schemas, which is not supported", id)
	}
	s, err = avro.Parse(got.Schema)
	if err != nil {
		return nil, fmt.Errorf("schema %d: %w", id, err)
	}
	r.mu.Lock()
	r.byID[id] = s
	r.mu.Unlock()
	return s, nil
}

// Latest returns the newest schema of subject (for a topic's values,
// TOPIC-value) and its id.
func (r *Registry) Latest(ctx context.Context, subject string) (avro.Schema, int, error) {
	ss, err := r.cl.SchemaByVersion(ctx, subject, -1)
	if err != nil {
		return nil, 0, fmt.Errorf("schema registry: subject %s: %w", subject, err)
	}
	s, err := r.Schema(ctx, ss.ID)
	return s, ss.ID, err
}
