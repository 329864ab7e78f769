package profiles

import "sync"

// CompartmentDefinition is a trimmed FHIR CompartmentDefinition.
type CompartmentDefinition struct {
	ID      string
	URL     string
	Version string
	Name    string
	// Code is the compartment type, e.g. "Patient".
	Code string
	// Resources maps each resource type that can be in the compartment to
	// the codes of the search parameters that link it to the compartment
	// owner. Resource types that are never in the compartment are absent.
	Resources map[string][]string
}

// Params returns the search parameter codes that link resources of type
// resourceType to the compartment, or nil if they are never in it.
func (c *CompartmentDefinition) Params(resourceType string) []string {
	return c.Resources[resourceType]
}

var patientCompartment = sync.OnceValues(decodePatientCompartment)

// decodePatientCompartment decodes the embedded Patient compartment.
func decodePatientCompartment() (*CompartmentDefinition, error) {
	var raw struct {
		ID       string `json:"id"`
		URL      string `json:"url"`
		Version  string `json:"version"`
		Name     string `json:"name"`
		Code     string `json:"code"`
		Resource []struct {
			Code  string   `json:"code"`
			Param []string `json:"param"`
		} `json:"resource"`
	}
	if err := decodeGzip("compartment-patient.json.gz", &raw); err != nil {
		return nil, err
	}
	c := &CompartmentDefinition{
		ID: raw.ID, URL: raw.URL, Version: raw.Version, Name: raw.Name, Code: raw.Code,
		Resources: make(map[string][]string, len(raw.Resource)),
	}
	for _, r := range raw.Resource {
		if len(r.Param) > 0 {
			c.Resources[r.Code] = r.Param
		}
	}
	return c, nil
}

// PatientCompartment returns the FHIR R4 Patient CompartmentDefinition.
func PatientCompartment() (*CompartmentDefinition, error) {
	return patientCompartment()
}
