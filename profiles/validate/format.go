package validate

// Hand-written checks of the R4 primitive formats that are on every
// resource (the regular expressions of the specification, spelled out);
// the others use the regex from the type's definition.

// formatCheck returns a fast check for a primitive type, or nil.
func formatCheck(name string) func(string) bool {
	switch name {
	case "date":
		return func(s string) bool { n, ok := datePart(s); return ok && n == len(s) }
	case "dateTime":
		return func(s string) bool { return dateTime(s, false) }
	case "instant":
		return func(s string) bool { return dateTime(s, true) }
	case "time":
		return func(s string) bool { n, ok := timePart(s); return ok && n == len(s) }
	case "code":
		return isCode
	case "id":
		return isID
	case "uri", "url", "canonical":
		return noSpace
	}
	return nil
}

func digits(s string, i, n int) bool {
	if i+n > len(s) {
		return false
	}
	for j := i; j < i+n; j++ {
		if s[j] < '0' || s[j] > '9' {
			return false
		}
	}
	return true
}

func num2(s string, i int) int { return int(s[i]-'0')*10 + int(s[i+1]-'0') }

// datePart matches YYYY, YYYY-MM or YYYY-MM-DD at the start of s and
// returns its length.
func datePart(s string) (int, bool) {
	if !digits(s, 0, 4) || s[:4] == "0000" {
		return 0, false
	}
	if len(s) == 4 || s[4] != '-' {
		return 4, true
	}
	if !digits(s, 5, 2) {
		return 0, false
	}
	if m := num2(s, 5); m < 1 || m > 12 {
		return 0, false
	}
	if len(s) == 7 || s[7] != '-' {
		return 7, true
	}
	if !digits(s, 8, 2) {
		return 0, false
	}
	if d := num2(s, 8); d < 1 || d > 31 {
		return 0, false
	}
	return 10, true
}

// timePart matches hh:mm:ss(.fraction)? and returns its length.
func timePart(s string) (int, bool) {
	if len(s) < 8 || !digits(s, 0, 2) || s[2] != ':' || !digits(s, 3, 2) || s[5] != ':' || !digits(s, 6, 2) {
		return 0, false
	}
	if num2(s, 0) > 23 || num2(s, 3) > 59 || num2(s, 6) > 60 {
		return 0, false
	}
	n := 8
	if n < len(s) && s[n] == '.' {
		j := n + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == n+1 {
			return 0, false
		}
		n = j
	}
	return n, true
}

func dateTime(s string, instant bool) bool {
	n, ok := datePart(s)
	if !ok {
		return false
	}
	if n == len(s) {
		return !instant
	}
	if n != 10 || s[n] != 'T' {
		return false
	}
	t, ok := timePart(s[n+1:])
	if !ok {
		return false
	}
	z := s[n+1+t:]
	if z == "Z" {
		return true
	}
	if len(z) != 6 || (z[0] != '+' && z[0] != '-') || !digits(z, 1, 2) || z[3] != ':' || !digits(z, 4, 2) {
		return false
	}
	h, m := num2(z, 1), num2(z, 4)
	return h < 14 || (h == 14 && m == 0)
}

// isCode: no leading, trailing or double whitespace, not empty.
func isCode(s string) bool {
	if s == "" {
		return false
	}
	prevSpace := true
	for i := 0; i < len(s); i++ {
		sp := s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'
		if sp && (prevSpace || s[i] != ' ') {
			return false
		}
		prevSpace = sp
	}
	return !prevSpace
}

func isID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func noSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return true
}
