package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// percentile returns the q-quantile (0..1, nearest rank) of samples.
func percentile(samples []time.Duration, q float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// durSummary renders p50/p99/max of samples in milliseconds.
func durSummary(samples []time.Duration) string {
	if len(samples) == 0 {
		return "no samples"
	}
	return fmt.Sprintf("p50 %.2fms p99 %.2fms max %.2fms", ms(percentile(samples, 0.5)),
		ms(percentile(samples, 0.99)), ms(percentile(samples, 1)))
}
