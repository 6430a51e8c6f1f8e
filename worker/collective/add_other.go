//go:build !amd64

package collective

func addTo(dst, src []float32) { addToGo(dst, src) }

func addScaledTo(dst, src []float32, k float32) { addScaledToGo(dst, src, k) }

func encodeHalf(dst []uint16, src []float32) { encodeHalfGo(dst, src) }

func decodeHalf(dst []float32, src []uint16) { decodeHalfGo(dst, src) }

func addHalf(dst []float32, src []uint16, k float32) { addHalfGo(dst, src, k) }
