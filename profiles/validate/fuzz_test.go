package validate

import (
	"context"
	"testing"
	"time"
)

func FuzzValidateJSON(f *testing.F) {
	f.Add([]byte(validPatient))
	f.Add([]byte(validObservation))
	f.Add([]byte(benchPatient))
	f.Add([]byte(`{"resourceType": "Bundle", "type": "collection", "entry": [{"resource": {"resourceType": "Patient", "contained": [{"resourceType": "Patient"}]}}]}`))
	f.Add([]byte(`{"resourceType": "Questionnaire", "status": "draft", "item": [{"linkId": "1", "type": "group", "item": [{"linkId": "2", "type": "string", "enableWhen": [{"question": "1", "operator": "exists", "answerBoolean": true}]}]}]}`))
	f.Add([]byte(`{"resourceType": "Patient", "birthDate": 12, "_birthDate": [1], "name": {"given": [null]}, "extension": [{"url": 1}]}`))
	f.Add([]byte(`{`))
	v := testValidator(f, Options{})
	// compile the plans before timing anything
	if err := v.Prepare(testPatientURL, testObsURL, testBundleURL); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{validPatient, validObservation} {
		if _, err := v.ValidateJSON(context.Background(), []byte(s), testPatientURL, testObsURL, testBundleURL); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 1<<16 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		res, err := v.ValidateJSON(ctx, body, testPatientURL, testObsURL, testBundleURL)
		if err != nil {
			t.Fatalf("error without cancellation: %v", err)
		}
		_ = res.HasErrors()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v", d)
		}
	})
}
