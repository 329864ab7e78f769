package synth

// LOINC is the code system of every Observation code.
const LOINC = "http://loinc.org"

// UCUM is the system of every valueQuantity.
const UCUM = "http://unitsofmeasure.org"

// CategorySystem is the system of Observation.category.
const CategorySystem = "http://terminology.hl7.org/CodeSystem/observation-category"

// Measure is a quantity a code is measured in, with the range generated
// values fall in and, for labs, the reference range reported with them.
type Measure struct {
	Code     string // LOINC code
	Display  string
	Unit     string // UCUM code, also used as the human unit
	Min, Max float64
	Decimals int
	// RefLow and RefHigh are the reference range; both 0 means none.
	RefLow, RefHigh float64
}

// Code is one kind of Observation the generator makes. A panel (blood
// pressure) has no value of its own: its Components carry the values.
type Code struct {
	Measure
	Category   string // "vital-signs" or "laboratory"
	Components []Measure
}

// Codes lists every Observation.code the generator uses (all in LOINC).
// The load scenario draws codes from it; component codes (systolic and
// diastolic blood pressure) are not Observation.code values.
var Codes = []Code{
	{Category: "vital-signs", Measure: Measure{Code: "8867-4", Display: "Heart rate", Unit: "/min", Min: 52, Max: 110, RefLow: 60, RefHigh: 100}},
	{Category: "vital-signs", Measure: Measure{Code: "9279-1", Display: "Respiratory rate", Unit: "/min", Min: 11, Max: 22, RefLow: 12, RefHigh: 20}},
	{Category: "vital-signs", Measure: Measure{Code: "8310-5", Display: "Body temperature", Unit: "Cel", Min: 36.0, Max: 38.6, Decimals: 1}},
	{Category: "vital-signs", Measure: Measure{Code: "29463-7", Display: "Body weight", Unit: "kg", Min: 45, Max: 120, Decimals: 1}},
	{Category: "vital-signs", Measure: Measure{Code: "8302-2", Display: "Body height", Unit: "cm", Min: 150, Max: 195, Decimals: 1}},
	{Category: "vital-signs", Measure: Measure{Code: "39156-5", Display: "Body mass index (BMI) [Ratio]", Unit: "kg/m2", Min: 18, Max: 38, Decimals: 1, RefLow: 18.5, RefHigh: 25}},
	{Category: "vital-signs", Measure: Measure{Code: "59408-5", Display: "Oxygen saturation in Arterial blood by Pulse oximetry", Unit: "%", Min: 90, Max: 100, RefLow: 95, RefHigh: 100}},
	{Category: "vital-signs", Measure: Measure{Code: "85354-9", Display: "Blood pressure panel with all children optional"}, Components: []Measure{
		{Code: "8480-6", Display: "Systolic blood pressure", Unit: "mm[Hg]", Min: 100, Max: 170, RefLow: 90, RefHigh: 120},
		{Code: "8462-4", Display: "Diastolic blood pressure", Unit: "mm[Hg]", Min: 60, Max: 105, RefLow: 60, RefHigh: 80},
	}},
	{Category: "laboratory", Measure: Measure{Code: "2339-0", Display: "Glucose [Mass/volume] in Blood", Unit: "mg/dL", Min: 65, Max: 180, RefLow: 70, RefHigh: 99}},
	{Category: "laboratory", Measure: Measure{Code: "2345-7", Display: "Glucose [Mass/volume] in Serum or Plasma", Unit: "mg/dL", Min: 65, Max: 180, RefLow: 70, RefHigh: 99}},
	{Category: "laboratory", Measure: Measure{Code: "4548-4", Display: "Hemoglobin A1c/Hemoglobin.total in Blood", Unit: "%", Min: 4.5, Max: 9.5, Decimals: 1, RefLow: 4, RefHigh: 5.6}},
	{Category: "laboratory", Measure: Measure{Code: "2160-0", Display: "Creatinine [Mass/volume] in Serum or Plasma", Unit: "mg/dL", Min: 0.5, Max: 1.8, Decimals: 2, RefLow: 0.6, RefHigh: 1.3}},
	{Category: "laboratory", Measure: Measure{Code: "3094-0", Display: "Urea nitrogen [Mass/volume] in Serum or Plasma", Unit: "mg/dL", Min: 6, Max: 30, RefLow: 7, RefHigh: 20}},
	{Category: "laboratory", Measure: Measure{Code: "2093-3", Display: "Cholesterol [Mass/volume] in Serum or Plasma", Unit: "mg/dL", Min: 130, Max: 290, RefLow: 0, RefHigh: 200}},
	{Category: "laboratory", Measure: Measure{Code: "2571-8", Display: "Triglyceride [Mass/volume] in Serum or Plasma", Unit: "mg/dL", Min: 50, Max: 300, RefLow: 0, RefHigh: 150}},
	{Category: "laboratory", Measure: Measure{Code: "2085-9", Display: "Cholesterol in HDL [Mass/volume] in Serum or Plasma", Unit: "mg/dL", Min: 30, Max: 90, RefLow: 40, RefHigh: 60}},
	{Category: "laboratory", Measure: Measure{Code: "18262-6", Display: "Cholesterol in LDL [Mass/volume] in Serum or Plasma by Direct assay", Unit: "mg/dL", Min: 60, Max: 200, RefLow: 0, RefHigh: 100}},
	{Category: "laboratory", Measure: Measure{Code: "718-7", Display: "Hemoglobin [Mass/volume] in Blood", Unit: "g/dL", Min: 10, Max: 18, Decimals: 1, RefLow: 12, RefHigh: 17.5}},
	{Category: "laboratory", Measure: Measure{Code: "6690-2", Display: "Leukocytes [#/volume] in Blood by Automated count", Unit: "10*3/uL", Min: 3, Max: 14, Decimals: 1, RefLow: 4.5, RefHigh: 11}},
	{Category: "laboratory", Measure: Measure{Code: "777-3", Display: "Platelets [#/volume] in Blood by Automated count", Unit: "10*3/uL", Min: 120, Max: 450, RefLow: 150, RefHigh: 400}},
	{Category: "laboratory", Measure: Measure{Code: "2951-2", Display: "Sodium [Moles/volume] in Serum or Plasma", Unit: "mmol/L", Min: 130, Max: 148, RefLow: 135, RefHigh: 145}},
	{Category: "laboratory", Measure: Measure{Code: "2823-3", Display: "Potassium [Moles/volume] in Serum or Plasma", Unit: "mmol/L", Min: 3.2, Max: 5.6, Decimals: 1, RefLow: 3.5, RefHigh: 5.1}},
}
