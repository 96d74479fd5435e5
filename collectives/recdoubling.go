package collectives

import "fmt"

// Recursive doubling AllReduce, the latency-optimal algorithm for small
// messages: log2(p) steps in which rank r exchanges its whole buffer with
// rank r XOR 2^k and adds what it receives. Cost about
// ⌈log2 n⌉·(α + B/β) against the ring's 2(n−1)·α + 2(n−1)/n·B/β, so it wins
// while α dominates.
//
// For n not a power of two, p is the largest power of two below n and the
// first 2(n−p) ranks pair up: each even one hands its buffer to its odd
// neighbour and sits out, the p survivors run the exchange, and the odd
// ranks hand the result back. Both partners of an exchange compute a+b in
// the same order up to commutation, which is exact in floating point, so
// every rank ends with bitwise identical results.
//
// Every exchange carries the whole buffer, so partners compare lengths for
// free: a mismatch between any two ranks shows up as ErrLengthMismatch at
// some pair of partners (the exchange graph is connected).

func (a *Allreducer) recursiveDoubling(buf []float32, op Op) error {
	c := a.Comm
	n, r := c.Size(), c.Rank()
	if n == 1 {
		return nil
	}
	if cap(a.scratch[0]) < len(buf) {
		a.scratch[0] = make([]float32, len(buf))
	}
	tmp := a.scratch[0][:len(buf)]
	p := 1
	for p*2 <= n {
		p *= 2
	}
	rem := n - p
	// Fold the extra ranks in: for r < 2·rem, even ranks send to r+1.
	newRank := -1
	switch {
	case r < 2*rem && r%2 == 0:
		a.Sent += 4 * int64(len(buf))
		if err := Send(c, buf, r+1, tagRecDoubling+a.tagOff); err != nil {
			return fmt.Errorf("recursive doubling fold: send to rank %d: %w", r+1, err)
		}
	case r < 2*rem:
		if err := Recv(c, tmp, r-1, tagRecDoubling+a.tagOff); err != nil {
			return fmt.Errorf("recursive doubling fold: recv from rank %d: %w", r-1, err)
		}
		addInto(buf, tmp)
		newRank = r / 2
	default:
		newRank = r - rem
	}
	if newRank >= 0 {
		toOld := func(nr int) int {
			if nr < rem {
				return nr*2 + 1
			}
			return nr + rem
		}
		for mask := 1; mask < p; mask <<= 1 {
			peer := toOld(newRank ^ mask)
			a.Sent += 4 * int64(len(buf))
			if err := SendRecv(c, buf, peer, tmp, peer, tagRecDoubling+a.tagOff); err != nil {
				return fmt.Errorf("recursive doubling step %d with rank %d: %w", trailingZeros(mask), peer, err)
			}
			// Each side adds its partner's buffer into its own: a+b here, b+a
			// there, which floating point makes equal bit for bit.
			addInto(buf, tmp)
		}
		if op == Avg {
			scale(buf, 1/float32(n))
		}
	}
	// Unfold: odd ranks give the result back to their even partner.
	switch {
	case r < 2*rem && r%2 == 0:
		if err := Recv(c, buf, r+1, tagRecDoubling+a.tagOff); err != nil {
			return fmt.Errorf("recursive doubling unfold: recv from rank %d: %w", r+1, err)
		}
	case r < 2*rem:
		a.Sent += 4 * int64(len(buf))
		if err := Send(c, buf, r-1, tagRecDoubling+a.tagOff); err != nil {
			return fmt.Errorf("recursive doubling unfold: send to rank %d: %w", r-1, err)
		}
	}
	return nil
}

func trailingZeros(x int) int {
	k := 0
	for x > 1 {
		x >>= 1
		k++
	}
	return k
}
