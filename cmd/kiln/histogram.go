package main

import (
	"math"
	"math/bits"
	"time"
)

// histogram counts durations in log-linear buckets, HDR-style: exact below
// 128 ns, then 64 buckets per power of two, so a reported percentile is at
// most 1/64 (1.6 %) above the true one. It takes a fixed 30 KB however long
// a run lasts.
type histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      float64 // ns
	min, max int64   // ns
}

const (
	histSubBits = 6
	histSub     = 1 << histSubBits // buckets per power of two
	histBuckets = 2*histSub + (63-histSubBits)*histSub
)

func histIndex(v int64) int {
	if v < 2*histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - (histSubBits + 1)
	return 2*histSub + (e-1)*histSub + int(v>>e) - histSub
}

// histUpper is the largest value that falls in bucket i.
func histUpper(i int) int64 {
	if i < 2*histSub {
		return int64(i)
	}
	e := (i-2*histSub)/histSub + 1
	m := int64((i-2*histSub)%histSub + histSub)
	return (m+1)<<e - 1
}

func (h *histogram) record(d time.Duration) {
	v := int64(d)
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.counts[histIndex(v)]++
	h.n++
	h.sum += float64(v)
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the value at quantile q in [0, 1] (0 when empty).
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(max(histUpper(i), h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}
