package blas

// HaveCgo tells the tests whether this build can load a library at all.
const HaveCgo = haveCgo
