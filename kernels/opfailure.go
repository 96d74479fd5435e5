package kernels

// OpFailure is what a backend panics with where a library fails inside a
// step that has no error to return (a buffer's accessor reordering it
// back from the library's layout): RecoverOp, deferred at the ops' callers
// (the model's layers, the training run, the benches), turns it back into
// Err, a one-line error naming the library and its status, instead of a
// crash.
type OpFailure struct{ Err error }

func (f OpFailure) Error() string { return f.Err.Error() }

// RecoverOp, deferred, sets *err to an OpFailure's error when the deferring
// function panics with one; any other panic goes on.
func RecoverOp(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if f, ok := r.(OpFailure); ok {
		*err = f.Err
		return
	}
	panic(r)
}
