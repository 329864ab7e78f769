package patch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const patient = `{"resourceType":"Patient","id":"p","name":[{"family":"Ames","given":["Ann"]}],"birthDate":"1970-01-01"}`

func TestOutputIsNotHTMLEscaped(t *testing.T) {
	out, err := JSONPatch([]byte(patient), []byte(`[{"op":"add","path":"/name/0/text","value":"<Ann> & co"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"<Ann> & co"`)) {
		t.Fatalf("HTML-escaped or lost: %s", out)
	}
	out, err = FHIRPathPatch([]byte(patient), []byte(`{"resourceType":"Parameters","parameter":[{"name":"operation","part":[
		{"name":"type","valueCode":"replace"},{"name":"path","valueString":"Patient.name.family"},{"name":"value","valueString":"<b>"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"<b>"`)) {
		t.Fatalf("HTML-escaped or lost: %s", out)
	}
}

func TestErrorType(t *testing.T) {
	_, err := JSONPatch([]byte(patient), []byte(`[{"op":"test","path":"/id","value":"p"},{"op":"remove","path":"/gender"}]`))
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != http.StatusUnprocessableEntity || pe.Op != 1 || pe.Desc != "remove /gender" {
		t.Fatalf("got %#v", err)
	}
	if want := "patch: operation 1 (remove /gender): /gender does not exist"; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	_, err = FHIRPathPatch([]byte(patient), []byte(`{"resourceType":"Parameters","parameter":[{"name":"operation","part":[
		{"name":"type","valueCode":"delete"},{"name":"path","valueString":"Patient.name.where(use="}]}]}`))
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || pe.Err == nil {
		t.Fatalf("got %#v", err)
	}
	// a stored resource that is not JSON is not the client's fault
	_, err = JSONPatch([]byte(`{`), []byte(`[]`))
	if err == nil || errors.As(err, &pe) {
		t.Fatalf("got %v", err)
	}
}

func TestEmptyPatches(t *testing.T) {
	for name, f := range map[string]func() ([]byte, error){
		"json":     func() ([]byte, error) { return JSONPatch([]byte(patient), []byte(`[]`)) },
		"fhirpath": func() ([]byte, error) { return FHIRPathPatch([]byte(patient), []byte(`{"resourceType":"Parameters"}`)) },
	} {
		out, err := f()
		if err != nil || !sameJSON(t, out, []byte(patient)) {
			t.Errorf("%s: %s, %v", name, out, err)
		}
	}
}

func TestTooManyOperations(t *testing.T) {
	ops := strings.Repeat(`{"op":"test","path":"/id","value":"p"},`, MaxOperations)
	if _, err := JSONPatch([]byte(patient), []byte("["+ops[:len(ops)-1]+"]")); err != nil {
		t.Fatalf("%d operations: %v", MaxOperations, err)
	}
	_, err := JSONPatch([]byte(patient), []byte("["+ops+`{"op":"test","path":"/id","value":"p"}]`))
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != 400 {
		t.Fatalf("got %v", err)
	}
	op := `{"name":"operation","part":[{"name":"type","valueCode":"delete"},{"name":"path","valueString":"Patient.gender"}]},`
	params := `{"resourceType":"Parameters","parameter":[` + strings.Repeat(op, MaxOperations+1)
	params = params[:len(params)-1] + "]}"
	if _, err := FHIRPathPatch([]byte(patient), []byte(params)); !errors.As(err, &pe) || pe.Status != 400 {
		t.Fatalf("got %v", err)
	}
}

func TestGrowthIsBounded(t *testing.T) {
	// each copy doubles the resource
	var b strings.Builder
	b.WriteString(`[{"op":"add","path":"/x","value":[]}`)
	for range 40 {
		b.WriteString(`,{"op":"copy","from":"/name","path":"/x/-"},{"op":"copy","from":"/x","path":"/name/-"}`)
	}
	b.WriteString("]")
	_, err := JSONPatch([]byte(patient), []byte(b.String()))
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != 422 || !strings.Contains(pe.Msg, "too large") {
		t.Fatalf("got %v", err)
	}
}

func TestResultDepthIsBounded(t *testing.T) {
	deep := strings.Repeat(`{"a":`, maxResultDepth) + "1" + strings.Repeat("}", maxResultDepth)
	_, err := JSONPatch([]byte(patient), []byte(`[{"op":"add","path":"/x","value":`+deep+`}]`))
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != 422 {
		t.Fatalf("got %v", err)
	}
}

func TestNumbersEqual(t *testing.T) {
	for _, c := range []struct {
		a, b string
		eq   bool
	}{
		{"1.50", "1.5", true}, {"15e-1", "1.5", true}, {"0", "-0", true}, {"0.0", "0e10", true},
		{"100", "1e2", true}, {"1E+2", "100.0", true}, {"-2", "2", false}, {"1e999999999", "1e999999998", false},
		{"1e999999999", "10e999999998", true}, {"0.1", "0.10000000000000001", false},
	} {
		if got := numbersEqual(c.a, c.b); got != c.eq {
			t.Errorf("numbersEqual(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

func TestSplitLastMember(t *testing.T) {
	for _, c := range []struct{ in, prefix, name string }{
		{"Patient.name", "Patient", "name"},
		{"Patient.name.where(use = 'a.b').given", "Patient.name.where(use = 'a.b')", "given"},
		{"Patient.contact[0].`telecom`", "Patient.contact[0]", "telecom"},
		{"Patient.name.first()", "", ""},
		{"name", "", ""},
		{"Patient.name.where(x='it\\'s.x')", "", ""},
	} {
		p, n, ok := splitLastMember(c.in)
		if ok != (c.name != "") || p != c.prefix || n != c.name {
			t.Errorf("splitLastMember(%q) = %q, %q, %v", c.in, p, n, ok)
		}
	}
}

func TestPointerParsing(t *testing.T) {
	got, err := parsePointer("/a~1b/m~0n/~01/")
	if err != nil || fmt.Sprint(got) != "[a/b m~n ~1 ]" {
		t.Fatalf("%q %v", got, err)
	}
	for _, bad := range []string{"a", "/~", "/~2", "/a~"} {
		if _, err := parsePointer(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The markers that locate primitives must never leak into the result.
func TestNoMarkersLeak(t *testing.T) {
	res := `{"resourceType":"Patient","id":"p","active":true,"gender":"male","name":[{"given":["A","B"],"_given":[null,{"id":"g"}]}]}`
	params := `{"resourceType":"Parameters","parameter":[{"name":"operation","part":[
		{"name":"type","valueCode":"replace"},{"name":"path","valueString":"Patient.name.given[0]"},{"name":"value","valueString":"Z"}]}]}`
	out, err := FHIRPathPatch([]byte(res), []byte(params))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"resourceType":"Patient","id":"p","active":true,"gender":"male","name":[{"given":["Z","B"],"_given":[null,{"id":"g"}]}]}`
	if !sameJSON(t, out, []byte(want)) {
		t.Fatalf("got %s", out)
	}
}

func TestContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := FHIRPathPatchContext(ctx, []byte(patient), []byte(`{"resourceType":"Parameters","parameter":[{"name":"operation","part":[
		{"name":"type","valueCode":"delete"},{"name":"path","valueString":"Patient.name"}]}]}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}
