package profiles

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Snapshot generation
//
// A StructureDefinition loaded without a snapshot gets one generated from
// its differential and the snapshot of its baseDefinition (generated
// first if it also lacks one). The differential is walked in order; each
// element is placed by its id (or, without an id, by its path, slice
// name and the slices that precede it) and merged onto a copy of the base
// element:
//
//   - min (when not 0) and max (which may not widen the base's) replace
//     the base's; type narrows the base's list (a code must be one of the
//     base's; profile and targetProfile replace the base's when given);
//     fixed[x], pattern[x], minValue[x], maxValue[x], maxLength, binding
//     and slicing replace; constraint and condition add to the base's;
//     mustSupport is set when true.
//   - A slice (Patient.identifier:nationalId) is a copy of the sliced
//     element and its expanded children as the base defines them (the
//     constraints this differential puts on the unsliced element and its
//     children are not copied, as in the published snapshots), min 0
//     unless the differential says otherwise, inserted after the existing
//     slices. The sliced
//     element needs a slicing, except extension and modifierExtension,
//     which are sliced by url when they have none.
//   - A path into a complex type that the base snapshot does not expand
//     (Patient.identifier.system, or Patient.identifier:nationalId.system)
//     expands the children of the element's type (its type profile's
//     snapshot when it has exactly one profile that the Set knows) in
//     place; a contentReference is expanded from the referenced element.
//   - A renamed choice (Observation.valueQuantity, or the slice form
//     Observation.value[x]:valueQuantity when value[x] has no slicing)
//     narrows value[x] to that type in place: the element keeps the path
//     and id Observation.value[x], and its children are
//     Observation.value[x].value and so on. Where the base snapshot holds
//     the type slice value[x]:valueQuantity (published snapshots do), the
//     differential constrains that slice.
//
// Not supported, reported as errors rather than guessed at: reslicing
// (slice names with "/"), slices of an element without slicing (other
// than extensions), paths into a choice element with more than one type,
// types not allowed by the base element, elements that match nothing in
// the base, a max wider than the base's, and a differential whose root is
// not the base's type. Not checked: that targetProfile and profile
// narrow the base's (they replace them), and invariants. Descriptive
// fields (short, definition, comments, mappings) are not kept.

// snapshotGen generates the snapshots of a Set's StructureDefinitions.
type snapshotGen struct {
	set   *Set
	state map[*StructureDefinition]int // genBusy or genDone
	errs  map[*StructureDefinition]error
}

const (
	genBusy = 1
	genDone = 2
)

// generateSnapshots gives a snapshot to every loaded StructureDefinition
// that lacks one.
func (s *Set) generateSnapshots() error {
	g := &snapshotGen{set: s, state: make(map[*StructureDefinition]int), errs: make(map[*StructureDefinition]error)}
	var errs []error
	for _, sd := range s.sds {
		if len(sd.Elements) > 0 {
			continue
		}
		if err := g.ensure(sd); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// ensure gives sd a snapshot if it has none.
func (g *snapshotGen) ensure(sd *StructureDefinition) error {
	if len(sd.Elements) > 0 {
		return nil
	}
	switch g.state[sd] {
	case genBusy:
		return fmt.Errorf("profiles: %s: snapshot generation: baseDefinition cycle", sd.URL)
	case genDone:
		if err := g.errs[sd]; err != nil {
			return err
		}
		return nil
	}
	g.state[sd] = genBusy
	err := g.generate(sd)
	g.state[sd] = genDone
	if err != nil {
		err = fmt.Errorf("profiles: %s: snapshot generation: %w", sd.URL, err)
		g.errs[sd] = err
	}
	return err
}

func (g *snapshotGen) generate(sd *StructureDefinition) error {
	if len(sd.Differential) == 0 {
		return errors.New("no snapshot and no differential")
	}
	if sd.BaseDefinition == "" {
		return errors.New("no baseDefinition")
	}
	base, ok := g.set.StructureDefinition(sd.BaseDefinition)
	if !ok {
		return fmt.Errorf("baseDefinition %s not found", sd.BaseDefinition)
	}
	if err := g.ensure(base); err != nil {
		return err
	}
	if len(base.Elements) == 0 {
		return fmt.Errorf("baseDefinition %s has no snapshot", sd.BaseDefinition)
	}
	if sd.Type != "" && sd.Type != base.Type {
		return fmt.Errorf("type %s differs from the base's %s", sd.Type, base.Type)
	}
	b := &builder{g: g, sd: sd, elems: make([]ElementDefinition, len(base.Elements))}
	copy(b.elems, base.Elements)
	b.orig = make(map[string]*ElementDefinition, len(base.Elements))
	for i := range b.elems {
		if b.elems[i].ID == "" {
			b.elems[i].ID = b.elems[i].Path
		}
		b.orig[b.elems[i].ID] = &base.Elements[i]
	}
	if err := b.apply(sd.Differential); err != nil {
		return err
	}
	sd.Elements = b.elems
	sd.SnapshotGenerated = true
	sd.index()
	return nil
}

// builder builds one snapshot.
type builder struct {
	g     *snapshotGen
	sd    *StructureDefinition
	elems []ElementDefinition
	// orig holds, by id, the elements as they were before the
	// differential applied: new slices copy these.
	orig map[string]*ElementDefinition
}

// apply places and merges the differential elements in order.
func (b *builder) apply(diff []ElementDefinition) error {
	type sliceCtx struct{ path, id string }
	var ctx []sliceCtx // slices seen, for differential elements without ids
	for i := range diff {
		d := &diff[i]
		id := d.ID
		if id == "" {
			if d.Path == "" {
				return fmt.Errorf("differential element %d: no id and no path", i)
			}
			id = d.Path
			best := -1
			for j, c := range ctx {
				if strings.HasPrefix(d.Path, c.path+".") && (best < 0 || len(c.path) >= len(ctx[best].path)) {
					best = j
				}
			}
			if best >= 0 {
				id = ctx[best].id + d.Path[len(ctx[best].path):]
			}
			ctx = slices.DeleteFunc(ctx, func(c sliceCtx) bool {
				return c.path == d.Path || strings.HasPrefix(c.path, d.Path+".")
			})
			if d.SliceName != "" {
				id += ":" + d.SliceName
				ctx = append(ctx, sliceCtx{d.Path, id})
			}
		}
		idx, err := b.place(id)
		if err != nil {
			return fmt.Errorf("differential element %s: %w", id, err)
		}
		if err := b.merge(idx, d); err != nil {
			return fmt.Errorf("differential element %s: %w", id, err)
		}
	}
	return nil
}

// idSegment is one dot-separated part of an element id: a name and an
// optional slice name.
type idSegment struct{ name, slice string }

func splitID(id string) []idSegment {
	parts := strings.Split(id, ".")
	segs := make([]idSegment, len(parts))
	for i, p := range parts {
		name, slice, _ := strings.Cut(p, ":")
		segs[i] = idSegment{name, slice}
	}
	return segs
}

// find returns the index of the element with the given id, or -1.
func (b *builder) find(id string) int {
	for i := range b.elems {
		if b.elems[i].ID == id {
			return i
		}
	}
	return -1
}

// place returns the index of the element a differential id designates,
// creating the slice it names (last segment only) and expanding types on
// the way.
func (b *builder) place(id string) (int, error) {
	segs := splitID(id)
	root := b.elems[0].ID
	if segs[0].name != root || segs[0].slice != "" {
		return 0, fmt.Errorf("does not start with %s", root)
	}
	cur := 0
	for k, sg := range segs[1:] {
		last := k == len(segs)-2
		if sg.name == "" {
			return 0, errors.New("empty path segment")
		}
		idx, err := b.child(cur, sg.name)
		if err != nil {
			return 0, err
		}
		if sg.slice != "" {
			e := &b.elems[idx]
			sid := e.ID + ":" + sg.slice
			if j := b.find(sid); j >= 0 {
				idx = j
			} else if code, ok := choiceRename(e, sg.slice); ok && e.Slicing == nil {
				if err := b.narrow(idx, code); err != nil {
					return 0, err
				}
			} else {
				if !last {
					return 0, fmt.Errorf("slice %s used before it is defined", sid)
				}
				if idx, err = b.newSlice(idx, sg.slice); err != nil {
					return 0, err
				}
			}
		}
		cur = idx
	}
	return cur, nil
}

// child returns the index of the child named name of the element at
// parent, expanding the parent's type when its children are not listed
// and resolving renamed choice elements.
func (b *builder) child(parent int, name string) (int, error) {
	pid := b.elems[parent].ID
	cid := pid + "." + name
	if j := b.find(cid); j >= 0 {
		return j, nil
	}
	if !b.hasChildren(parent) {
		if err := b.expand(parent); err != nil {
			return 0, err
		}
		if j := b.find(cid); j >= 0 {
			return j, nil
		}
	}
	// A renamed choice element: valueQuantity for value[x].
	for i := parent + 1; i < len(b.elems) && strings.HasPrefix(b.elems[i].ID, pid+"."); i++ {
		rest := b.elems[i].ID[len(pid)+1:]
		if strings.ContainsAny(rest, ".:") || !strings.HasSuffix(rest, "[x]") {
			continue
		}
		if code, ok := choiceRename(&b.elems[i], name); ok {
			// A base snapshot may hold the renamed choice as a type slice
			// (value[x]:valueQuantity), as published snapshots do.
			if j := b.find(b.elems[i].ID + ":" + name); j >= 0 {
				return j, nil
			}
			if err := b.narrow(i, code); err != nil {
				return 0, err
			}
			return i, nil
		}
	}
	return 0, fmt.Errorf("no element %s in the base", cid)
}

// choiceRename reports whether name is the name of the choice element e
// renamed for one of its types (valueQuantity for value[x]), and which.
func choiceRename(e *ElementDefinition, name string) (string, bool) {
	last := e.Path[strings.LastIndexByte(e.Path, '.')+1:]
	stem, ok := strings.CutSuffix(last, "[x]")
	if !ok {
		return "", false
	}
	suffix, ok := strings.CutPrefix(name, stem)
	if !ok || suffix == "" {
		return "", false
	}
	for _, t := range e.Type {
		if upperFirst(t.Code) == suffix {
			return t.Code, true
		}
	}
	// A type the base no longer allows: report it as a rename so that
	// narrow says why it fails.
	if suffix[0] >= 'A' && suffix[0] <= 'Z' {
		return lowerFirstIfPrimitive(suffix), true
	}
	return "", false
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// lowerFirstIfPrimitive turns a renamed suffix back into a type code:
// primitive type codes start with a lower-case letter.
func lowerFirstIfPrimitive(s string) string {
	if sd, ok := TypeDefinition(s); ok && sd.Kind != "primitive-type" {
		return s
	}
	l := string(s[0]-'A'+'a') + s[1:]
	if _, ok := TypeDefinition(l); ok {
		return l
	}
	return s
}

// narrow restricts the types of the element at idx to code.
func (b *builder) narrow(idx int, code string) error {
	e := &b.elems[idx]
	for _, t := range e.Type {
		if t.Code == code {
			e.Type = []ElementType{t}
			return nil
		}
	}
	return fmt.Errorf("type %s not allowed for %s (allowed: %s)", code, e.ID, typeCodesOf(e.Type))
}

func typeCodesOf(types []ElementType) string {
	codes := make([]string, len(types))
	for i, t := range types {
		codes[i] = t.Code
	}
	return strings.Join(codes, ", ")
}

// hasChildren reports whether the element at idx is followed by its
// children.
func (b *builder) hasChildren(idx int) bool {
	return idx+1 < len(b.elems) && strings.HasPrefix(b.elems[idx+1].ID, b.elems[idx].ID+".")
}

// expand inserts the children of the element at idx, taken from its type
// (or type profile) or its contentReference.
func (b *builder) expand(idx int) error {
	e := b.elems[idx]
	var src []ElementDefinition
	var srcPath, srcID string
	switch {
	case e.ContentReference != "":
		ref := e.ContentReference[strings.IndexByte(e.ContentReference, '#')+1:]
		root, _, _ := strings.Cut(ref, ".")
		def, ok := b.g.set.TypeDefinition(root)
		if !ok {
			return fmt.Errorf("contentReference %s of %s: type %s not found", e.ContentReference, e.ID, root)
		}
		for _, x := range def.Elements {
			if strings.HasPrefix(x.Path, ref+".") && !strings.Contains(x.ID, ":") {
				src = append(src, x)
			}
		}
		if len(src) == 0 {
			return fmt.Errorf("contentReference %s of %s: no elements", e.ContentReference, e.ID)
		}
		srcPath, srcID = ref, ref
	case len(e.Type) == 1:
		t := e.Type[0]
		var def *StructureDefinition
		if len(t.Profile) == 1 {
			if p, ok := b.g.set.StructureDefinition(t.Profile[0]); ok {
				if err := b.g.ensure(p); err != nil {
					return err
				}
				def = p
			}
		}
		if def == nil {
			d, ok := b.g.set.TypeDefinition(t.Code)
			if !ok {
				return fmt.Errorf("cannot expand %s: type %s not found", e.ID, t.Code)
			}
			def = d
		}
		if len(def.Elements) < 2 {
			return fmt.Errorf("cannot expand %s: type %s has no children", e.ID, t.Code)
		}
		src = def.Elements[1:]
		srcPath, srcID = def.Elements[0].Path, def.Elements[0].ID
		if srcID == "" {
			srcID = srcPath
		}
	case len(e.Type) == 0:
		return fmt.Errorf("cannot expand %s: no type", e.ID)
	default:
		return fmt.Errorf("cannot expand %s: a choice of %s (rename it to one type)", e.ID, typeCodesOf(e.Type))
	}
	children := make([]ElementDefinition, 0, len(src))
	for _, x := range src {
		if !strings.HasPrefix(x.Path, srcPath+".") {
			continue
		}
		c := x
		c.Path = e.Path + x.Path[len(srcPath):]
		if x.ID != "" && strings.HasPrefix(x.ID, srcID+".") {
			c.ID = e.ID + x.ID[len(srcID):]
		} else {
			c.ID = e.ID + x.Path[len(srcPath):]
		}
		children = append(children, c)
	}
	for i := range children {
		b.orig[children[i].ID] = &children[i]
	}
	b.elems = slices.Insert(b.elems, idx+1, children...)
	return nil
}

// isExtensionPath reports whether path names an extension or
// modifierExtension element, which are sliced by url by default.
func isExtensionPath(path string) bool {
	return strings.HasSuffix(path, ".extension") || strings.HasSuffix(path, ".modifierExtension")
}

// newSlice creates the slice name of the element at idx, after the
// element's children and existing slices, and returns its index.
func (b *builder) newSlice(idx int, name string) (int, error) {
	sliced := &b.elems[idx]
	if strings.Contains(name, "/") {
		return 0, fmt.Errorf("reslicing (%s:%s) is not supported", sliced.ID, name)
	}
	if sliced.Slicing == nil {
		if !isExtensionPath(sliced.Path) {
			return 0, fmt.Errorf("slice %s:%s of an element without slicing", sliced.ID, name)
		}
		sliced.Slicing = &Slicing{Discriminator: []Discriminator{{Type: "value", Path: "url"}}, Rules: "open"}
	}
	sid := sliced.ID + ":" + name
	slice := b.original(idx)
	slice.ID, slice.SliceName, slice.Slicing, slice.Min = sid, name, nil, 0
	added := []ElementDefinition{slice}
	end := idx + 1
	for ; end < len(b.elems); end++ {
		id := b.elems[end].ID
		if strings.HasPrefix(id, sliced.ID+".") {
			c := b.original(end)
			c.ID = sid + id[len(sliced.ID):]
			added = append(added, c)
			continue
		}
		if !strings.HasPrefix(id, sliced.ID+":") {
			break
		}
	}
	b.elems = slices.Insert(b.elems, end, added...)
	for i := range added {
		b.orig[added[i].ID] = &added[i]
	}
	return end, nil
}

// original returns a copy of the element at idx as it was before the
// differential constrained it.
func (b *builder) original(idx int) ElementDefinition {
	if o, ok := b.orig[b.elems[idx].ID]; ok {
		return *o
	}
	return b.elems[idx]
}

// merge applies the constraints of the differential element d to the
// element at idx.
func (b *builder) merge(idx int, d *ElementDefinition) error {
	e := &b.elems[idx]
	if d.Path != "" && d.Path != e.Path && !choicePathMatches(e.Path, d.Path) {
		return fmt.Errorf("path %s does not match the element's path %s", d.Path, e.Path)
	}
	if d.Min != 0 {
		e.Min = d.Min
	}
	if d.Max != "" {
		if wider(d.Max, e.Max) {
			return fmt.Errorf("max %s is wider than the base's %s", d.Max, e.Max)
		}
		e.Max = d.Max
	}
	if e.Max != "*" && e.Max != "" {
		if m, err := strconv.Atoi(e.Max); err == nil && e.Min > m {
			return fmt.Errorf("min %d is greater than max %s", e.Min, e.Max)
		}
	}
	if len(d.Type) > 0 {
		types, err := narrowTypes(e, d.Type)
		if err != nil {
			return err
		}
		e.Type = types
	}
	if d.FixedKey != "" {
		e.FixedKey, e.Fixed = d.FixedKey, d.Fixed
	}
	if d.PatternKey != "" {
		e.PatternKey, e.Pattern = d.PatternKey, d.Pattern
	}
	if d.MinValueKey != "" {
		e.MinValueKey, e.MinValue = d.MinValueKey, d.MinValue
	}
	if d.MaxValueKey != "" {
		e.MaxValueKey, e.MaxValue = d.MaxValueKey, d.MaxValue
	}
	if d.MaxLength != 0 {
		e.MaxLength = d.MaxLength
	}
	if d.Binding != nil {
		nb := *d.Binding
		if e.Binding != nil {
			if nb.Strength == "" {
				nb.Strength = e.Binding.Strength
			}
			if nb.ValueSet == "" {
				nb.ValueSet = e.Binding.ValueSet
			}
		}
		e.Binding = &nb
	}
	if d.Slicing != nil {
		sl := *d.Slicing
		if sl.Rules == "" && e.Slicing != nil {
			sl.Rules = e.Slicing.Rules
		}
		if len(sl.Discriminator) == 0 && e.Slicing != nil {
			sl.Discriminator = e.Slicing.Discriminator
		}
		e.Slicing = &sl
	}
	for _, c := range d.Constraint {
		if !slices.ContainsFunc(e.Constraint, func(x Constraint) bool { return x.Key == c.Key }) {
			e.Constraint = append(slices.Clip(e.Constraint), c)
		}
	}
	for _, c := range d.Condition {
		if !slices.Contains(e.Condition, c) {
			e.Condition = append(slices.Clip(e.Condition), c)
		}
	}
	if d.MustSupport {
		e.MustSupport = true
	}
	return nil
}

// choicePathMatches reports whether a differential path such as
// Observation.valueQuantity names the choice element path
// Observation.value[x], or a child of it.
func choicePathMatches(elemPath, diffPath string) bool {
	ep, dp := strings.Split(elemPath, "."), strings.Split(diffPath, ".")
	if len(ep) != len(dp) {
		return false
	}
	for i := range ep {
		if ep[i] == dp[i] {
			continue
		}
		stem, ok := strings.CutSuffix(ep[i], "[x]")
		if !ok || !strings.HasPrefix(dp[i], stem) {
			return false
		}
	}
	return true
}

// wider reports whether the max a is wider than the max b.
func wider(a, b string) bool {
	if b == "" || b == "*" {
		return false
	}
	if a == "*" {
		return true
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	return err1 == nil && err2 == nil && x > y
}

// narrowTypes returns the types of e narrowed to those the differential
// lists.
func narrowTypes(e *ElementDefinition, diff []ElementType) ([]ElementType, error) {
	if len(e.Type) == 0 {
		return nil, fmt.Errorf("type given for %s, which has none in the base", e.ID)
	}
	out := make([]ElementType, 0, len(diff))
	for _, dt := range diff {
		i := slices.IndexFunc(e.Type, func(t ElementType) bool { return t.Code == dt.Code })
		if i < 0 {
			// Primitive values are typed with FHIRPath system types in the
			// snapshot; the differential may name the FHIR type.
			i = slices.IndexFunc(e.Type, func(t ElementType) bool { return t.FHIRType() == dt.Code })
			if i >= 0 {
				out = append(out, e.Type[i])
				continue
			}
			return nil, fmt.Errorf("type %s not allowed for %s (allowed: %s)", dt.Code, e.ID, typeCodesOf(e.Type))
		}
		nt := e.Type[i]
		if len(dt.Profile) > 0 {
			nt.Profile = dt.Profile
		}
		if len(dt.TargetProfile) > 0 {
			nt.TargetProfile = dt.TargetProfile
		}
		out = append(out, nt)
	}
	return out, nil
}
