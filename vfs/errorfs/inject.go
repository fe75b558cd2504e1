package errorfs

import (
	"errors"
	"sync/atomic"
)

// ErrInjected is the error the injectors of this package return. Errors the
// FS returns for them match it with errors.Is.
var ErrInjected = errors.New("errorfs: injected error")

// Injector decides whether an operation fails. MaybeError is called before
// every operation, counted or not, with Op.Index set; a non-nil result makes
// the operation fail with that error (which should wrap [ErrInjected] so
// callers can recognise it). Implementations must be safe for concurrent
// use.
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to an Injector.
type InjectorFunc func(Op) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// OnIndex returns an injector that fails the k-th counted operation (k is
// 1-based) and, once it has fired, every later operation, counted or not:
// the process is dead from that point on. For k <= 0 it never fires. It
// keeps state: use a new one for each run.
func OnIndex(k int64) Injector {
	return &onIndex{k: k}
}

type onIndex struct {
	k    int64
	dead atomic.Bool
}

func (i *onIndex) MaybeError(op Op) error {
	if i.dead.Load() {
		return ErrInjected
	}
	// ">=" rather than "==": with concurrent callers a later-numbered
	// operation may get here before operation k, and must not slip through.
	if i.k > 0 && op.Index >= i.k {
		i.dead.Store(true)
		return ErrInjected
	}
	return nil
}

// OnceAt returns an injector that fails only the k-th counted operation
// (1-based) and lets every other one run: a transient error, after which
// the process goes on.
func OnceAt(k int64) Injector {
	return InjectorFunc(func(op Op) error {
		if k > 0 && op.Index == k {
			return ErrInjected
		}
		return nil
	})
}
