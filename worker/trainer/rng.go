package trainer

import "math"

// The generators here are written out, not taken from math/rand, so that the
// data set and the initial parameters are a documented pure function of the
// seed that any implementation (and any later Go release) can reproduce.

const (
	golden = 0x9e3779b97f4a7c15
	sqrt3  = 1.7320508075688772
)

// Domains keep the streams drawn from one seed apart.
const (
	domainSample  uint64 = 1
	domainTeacher uint64 = 2
	domainModel   uint64 = 3
	domainShuffle uint64 = 4
	domainHeldOut uint64 = 5
)

// mix64 is the splitmix64 finaliser: a bijection on uint64 with good
// avalanche, used both to step the generator and to hash keys.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// streamKey derives the starting state of the stream (seed, domain, index).
func streamKey(seed int64, domain, index uint64) uint64 {
	return mix64(mix64(uint64(seed)^domain*golden) + index*golden)
}

// splitmix is the splitmix64 generator.
type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += golden
	return mix64(s.state)
}

// unit24 maps a 24-bit integer u to [-sqrt3, sqrt3), a uniform value with
// unit variance. Every operation is exact or a single IEEE rounding, so the
// result is the same on every platform.
func unit24(u uint64) float64 {
	v := float64(u)*(2.0/(1<<24)) - 1.0
	return v * sqrt3
}

// uniformPair draws two unit-variance uniform values from one 64-bit word.
func (s *splitmix) uniformPair() (float64, float64) {
	r := s.next()
	return unit24(r >> 40), unit24((r >> 16) & (1<<24 - 1))
}

// uniform draws one unit-variance uniform value.
func (s *splitmix) uniform() float64 { return unit24(s.next() >> 40) }

// heStd is the standard deviation of He initialisation for ReLU layers,
// sqrt(2/fanIn); weights are uniform() * heStd, so uniform on
// [-sqrt(6/fanIn), sqrt(6/fanIn)).
func heStd(fanIn int) float64 { return math.Sqrt(2.0 / float64(fanIn)) }
