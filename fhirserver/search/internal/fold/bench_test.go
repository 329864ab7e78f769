package fold

import "testing"

// BenchmarkNormalize measures the string fold on the inputs index writes
// and queries meet: already-normal ASCII (the allocation-free path),
// ASCII with capitals, Latin names with accents, Vietnamese precomposed,
// Greek, and Korean (past the table: foldReference's path). The
// reference variants fold with the definition, golang.org/x/text alone.
func BenchmarkNormalize(b *testing.B) {
	for _, c := range []struct{ name, in string }{
		{"ascii-normal", "jo van der berg"},
		{"ascii-upper", "Jo van der Berg"},
		{"latin1", "José Peña Müller"},
		{"vietnamese", "Nguyễn Thị Đặng"},
		{"greek", "Σωκράτης Παπαδόπουλος"},
		{"address", "  Straße der Pariser Kommune 12,  10243 Berlin "},
		{"korean", "김민준"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Normalize(c.in)
			}
		})
		b.Run(c.name+"/reference", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = foldReference(c.in)
			}
		})
	}
}
