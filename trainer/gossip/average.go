package gossip

// Average sets both x and y to (x+y)/2, element by element: AD-PSGD's
// pairwise averaging. Both ranks of a pair call it with their own model
// first, and both end with the same bits (IEEE addition commutes, and
// halving is exact short of underflow), so the pair's sum is unchanged up
// to one rounding of x+y.
func Average(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		v := (x[i] + y[i]) * 0.5
		x[i], y[i] = v, v
	}
}

// AverageInto sets x to (x+y)/2 and leaves y alone: one side of a pairwise
// averaging, where y is the partner's model as it was sent.
func AverageInto(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		x[i] = (x[i] + y[i]) * 0.5
	}
}
