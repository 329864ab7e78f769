package value

import "fmt"

func ErrSingleton(what string) error {
	return fmt.Errorf("fhirpath: %s expects a single item, got a collection", what)
}

// Singleton returns the single item of c (ok=false when empty) or an error
// when c holds more than one item.
func Singleton(c Collection, what string) (Value, bool, error) {
	switch len(c) {
	case 0:
		return Value{}, false, nil
	case 1:
		return c[0], true, nil
	}
	return Value{}, false, ErrSingleton(what)
}

func SingletonInt(c Collection) (int64, bool, error) {
	v, ok, err := Singleton(c, "integer argument")
	if !ok || err != nil {
		return 0, false, err
	}
	v = ToSystem(v)
	if v.k != kInt {
		return 0, false, fmt.Errorf("fhirpath: expected an Integer, got %s", v.TypeName())
	}
	return v.n, true, nil
}

// SingletonBool applies the singleton evaluation of collections for
// Boolean contexts: a single non-Boolean item counts as true.
func SingletonBool(c Collection, what string) (bool, bool, error) {
	v, ok, err := Singleton(c, what)
	if !ok || err != nil {
		return false, false, err
	}
	v = ToSystem(v)
	if v.k == kBool {
		return v.n != 0, true, nil
	}
	return true, true, nil
}

func SingletonString(c Collection, what string) (string, bool, error) {
	v, ok, err := Singleton(c, what)
	if !ok || err != nil {
		return "", false, err
	}
	v = ToSystem(v)
	if v.k != kStr {
		return "", false, fmt.Errorf("fhirpath: %s expects a String, got %s", what, v.TypeName())
	}
	return v.s, true, nil
}
