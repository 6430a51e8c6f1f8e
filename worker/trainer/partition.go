package trainer

import "fmt"

// NumPartitions is how many partitions the samples are cut into.
func (d *Dataset) NumPartitions() int { return d.spec.Partitions }

// Partition returns partition p's contiguous range of sample ids,
// [first, first+count). The ranges cover [0, Samples) exactly once and their
// sizes differ by at most one.
func (d *Dataset) Partition(p int) (first int64, count int64) {
	if p < 0 || p >= d.spec.Partitions {
		panic(fmt.Sprintf("trainer: partition %d outside [0, %d)", p, d.spec.Partitions))
	}
	s, n := int64(d.spec.Samples), int64(d.spec.Partitions)
	first = s * int64(p) / n
	return first, s*int64(p+1)/n - first
}

// PartitionSamples appends to out[:0] the ids at positions [offset,
// offset+n) of partition p's order in the given epoch, clipped at the
// partition's end, and returns it. The order is a permutation of the
// partition drawn from (Seed, epoch, p) and computed position by position, so
// a worker resuming at a committed offset needs nothing but the offset.
func (d *Dataset) PartitionSamples(epoch, p int, offset int64, n int, out []int64) []int64 {
	first, count := d.Partition(p)
	out = out[:0]
	if offset < 0 || n <= 0 || offset >= count {
		return out
	}
	perm := newPermutation(count, streamKey(d.spec.Seed, domainShuffle, uint64(epoch)<<32|uint64(p)))
	end := min(offset+int64(n), count)
	for pos := offset; pos < end; pos++ {
		out = append(out, first+perm.at(pos))
	}
	return out
}

// permutation is a keyed bijection on [0, size): a balanced Feistel network
// on the smallest even number of bits that holds size, with cycle walking to
// stay inside the range (fewer than four rounds of walking on average).
type permutation struct {
	size int64
	half uint // bits per Feistel half
	keys [4]uint64
}

func newPermutation(size int64, key uint64) permutation {
	bits := uint(2)
	for int64(1)<<bits < size {
		bits++
	}
	bits += bits & 1
	p := permutation{size: size, half: bits / 2}
	for r := range p.keys {
		key = mix64(key + golden)
		p.keys[r] = key
	}
	return p
}

func (p permutation) at(pos int64) int64 {
	v := uint64(pos)
	for {
		v = p.round(v)
		if int64(v) < p.size {
			return int64(v)
		}
	}
}

func (p permutation) round(v uint64) uint64 {
	mask := uint64(1)<<p.half - 1
	l, r := v>>p.half, v&mask
	for _, k := range p.keys {
		l, r = r, l^(mix64(r^k)&mask)
	}
	return l<<p.half | r
}
