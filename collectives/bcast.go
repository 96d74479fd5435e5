package collectives

import "fmt"

// Broadcast copies root's buf into every rank's buf along a binomial tree:
// ⌈log2 n⌉ rounds, in round k the 2^k ranks that hold the data (counted
// from root) each send it to the rank 2^k further on. Every rank must pass a
// buffer of the same length; a shorter or longer one fails with
// ErrLengthMismatch at the receiving rank.
func Broadcast(c PointToPoint, buf []float32, root int) error {
	n, r := c.Size(), c.Rank()
	if root < 0 || root >= n {
		return fmt.Errorf("broadcast: root %d not in [0,%d): %w", root, n, ErrBadRank)
	}
	EnterOp(c, "broadcast")
	off := seqTags(c)
	rel := (r - root + n) % n // rank relative to root
	// Receive from the parent: the rank that differs in rel's highest set bit.
	mask := 1
	for mask < n {
		if rel&mask != 0 {
			parent := (rel - mask + root) % n
			if err := Recv(c, buf, parent, tagBcast+off); err != nil {
				return fmt.Errorf("broadcast from root %d: recv from rank %d: %w", root, parent, err)
			}
			break
		}
		mask <<= 1
	}
	// Send to children rel+mask/2, rel+mask/4, … that exist.
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < n {
			child := (rel + mask + root) % n
			if err := Send(c, buf, child, tagBcast+off); err != nil {
				return fmt.Errorf("broadcast from root %d: send to rank %d: %w", root, child, err)
			}
		}
	}
	return nil
}

// Allgather gathers every rank's send block into recv, ordered by rank:
// recv[i*len(send):(i+1)*len(send)] is rank i's block. It runs the ring's
// all-gather (n−1 steps, each rank forwarding the block it got last).
// len(recv) must be Size()·len(send).
func Allgather(c PointToPoint, send, recv []float32) error {
	n, r := c.Size(), c.Rank()
	m := len(send)
	if len(recv) != n*m {
		return fmt.Errorf("allgather: recv has %d elements, want %d ranks × %d: %w", len(recv), n, m, ErrLengthMismatch)
	}
	EnterOp(c, "allgather")
	off := seqTags(c)
	copy(recv[r*m:(r+1)*m], send)
	left, right := (r-1+n)%n, (r+1)%n
	for t := 0; t < n-1; t++ {
		sb := (r - t + n) % n
		rb := (r - t - 1 + n) % n
		if err := SendRecv(c, recv[sb*m:(sb+1)*m], right, recv[rb*m:(rb+1)*m], left, tagAllgather+off); err != nil {
			return fmt.Errorf("allgather step %d: %w", t, err)
		}
	}
	return nil
}
