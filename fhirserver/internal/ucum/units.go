package ucum

// This file holds the UCUM unit table: prefixes and atoms with their
// definitions (magnitude and defining unit expression), taken from the
// UCUM specification (https://ucum.org/ucum). Definitions are resolved
// once, at package initialisation, into exact magnitudes over base units.

// prefixDef is a UCUM prefix: symbol and exact decimal/rational value.
type prefixDef struct {
	sym string
	val string
}

// prefixes in lookup order: two-character prefixes first so that "da" wins
// over "d" followed by an atom beginning with "a".
var prefixDefs = []prefixDef{
	{"da", "10"},
	{"Ki", "1024"}, {"Mi", "1048576"}, {"Gi", "1073741824"}, {"Ti", "1099511627776"},
	{"Y", "1e24"}, {"Z", "1e21"}, {"E", "1e18"}, {"P", "1e15"}, {"T", "1e12"},
	{"G", "1e9"}, {"M", "1e6"}, {"k", "1e3"}, {"h", "1e2"},
	{"d", "1e-1"}, {"c", "1e-2"}, {"m", "1e-3"}, {"u", "1e-6"}, {"n", "1e-9"},
	{"p", "1e-12"}, {"f", "1e-15"}, {"a", "1e-18"}, {"z", "1e-21"}, {"y", "1e-24"},
}

// atom kinds.
const (
	kRatio       = iota // ordinary unit: val × unit
	kBase               // base unit (own dimension); also arbitrary units
	kSpecial            // special unit with a supported offset conversion
	kUnsupported        // special (non-ratio) unit we recognise but cannot convert
)

// special conversion identifiers (kSpecial).
const (
	spNone  = iota
	spCel   // degree Celsius
	spDegF  // degree Fahrenheit
	spDegRe // degree Réaumur
)

// atomDef is one UCUM atom. For kRatio the atom equals val × unit.
// For kSpecial, unit is the base-unit expression of the scale (K).
type atomDef struct {
	sym    string
	metric bool // prefixes allowed
	kind   int
	val    string
	unit   string
	sp     int
}

const (
	met = true  // metric: prefixes allowed
	non = false // not metric
)

func def(sym string, metric bool, val, unit string) atomDef {
	return atomDef{sym: sym, metric: metric, kind: kRatio, val: val, unit: unit}
}

func base(sym string, metric bool) atomDef {
	return atomDef{sym: sym, metric: metric, kind: kBase, val: "1"}
}

func special(sym string, sp int) atomDef {
	return atomDef{sym: sym, metric: true, kind: kSpecial, val: "1", unit: "K", sp: sp}
}

func unsupported(sym string, metric bool) atomDef {
	return atomDef{sym: sym, metric: metric, kind: kUnsupported}
}

// atomDefs is the UCUM atom table. mol is treated as a base unit (the
// spec defines it as 6.0221367e23 × 1), so amounts of substance stay a
// dimension of their own; arbitrary units are base units of their own too,
// commensurable only with themselves.
var atomDefs = []atomDef{
	// Base units.
	base("m", met), base("s", met), base("g", met), base("rad", met),
	base("K", met), base("C", met), base("cd", met), base("mol", met),

	// Dimensionless.
	def("10*", non, "10", "1"), def("10^", non, "10", "1"),
	def("[pi]", non, "3.1415926535897932384626433832795028841971693993751058209749445923", "1"),
	def("%", non, "1", "10*-2"), def("[ppth]", non, "1", "10*-3"), def("[ppm]", non, "1", "10*-6"),
	def("[ppb]", non, "1", "10*-9"), def("[pptr]", non, "1", "10*-12"),

	// SI derived units.
	def("sr", met, "1", "rad2"), def("Hz", met, "1", "s-1"), def("N", met, "1", "kg.m/s2"),
	def("Pa", met, "1", "N/m2"), def("J", met, "1", "N.m"), def("W", met, "1", "J/s"),
	def("A", met, "1", "C/s"), def("V", met, "1", "J/C"), def("F", met, "1", "C/V"),
	def("Ohm", met, "1", "V/A"), def("S", met, "1", "Ohm-1"), def("Wb", met, "1", "V.s"),
	special("Cel", spCel), def("T", met, "1", "Wb/m2"), def("H", met, "1", "Wb/A"),
	def("lm", met, "1", "cd.sr"), def("lx", met, "1", "lm/m2"), def("Bq", met, "1", "s-1"),
	def("Gy", met, "1", "J/kg"), def("Sv", met, "1", "J/kg"),

	// ISO 1000 and other units used with SI.
	def("gon", non, "0.9", "deg"), def("deg", non, "2", "[pi].rad/360"),
	def("'", non, "1", "deg/60"), def("''", non, "1", "'/60"),
	def("l", met, "1", "dm3"), def("L", met, "1", "l"), def("ar", met, "100", "m2"),
	def("min", non, "60", "s"), def("h", non, "60", "min"), def("d", non, "24", "h"),
	def("a_t", non, "365.24219", "d"), def("a_j", non, "365.25", "d"), def("a_g", non, "365.2425", "d"),
	def("a", non, "1", "a_j"), def("wk", non, "7", "d"), def("mo_s", non, "29.53059", "d"),
	def("mo_j", non, "1", "a_j/12"), def("mo_g", non, "1", "a_g/12"), def("mo", non, "1", "mo_j"),
	def("t", met, "1e3", "kg"), def("bar", met, "1e5", "Pa"), def("u", met, "1.6605402e-24", "g"),
	def("eV", met, "1", "[e].V"), def("AU", non, "149597.870691", "Mm"), def("pc", met, "3.085678e16", "m"),

	// Natural constants.
	def("[c]", met, "299792458", "m/s"), def("[h]", met, "6.6260755e-34", "J.s"),
	def("[k]", met, "1.380658e-23", "J/K"), def("[eps_0]", met, "8.854187817e-12", "F/m"),
	def("[mu_0]", met, "1", "4.[pi].10*-7.N/A2"), def("[e]", met, "1.60217733e-19", "C"),
	def("[m_e]", met, "9.1093897e-28", "g"), def("[m_p]", met, "1.6726231e-24", "g"),
	def("[G]", met, "6.67259e-11", "m3.kg-1.s-2"), def("[g]", met, "9.80665", "m/s2"),
	def("atm", non, "101325", "Pa"), def("[ly]", met, "1", "[c].a_j"),
	def("gf", met, "1", "g.[g]"), def("[lbf_av]", non, "1", "[lb_av].[g]"),

	// CGS units.
	def("Ky", met, "1", "cm-1"), def("Gal", met, "1", "cm/s2"), def("dyn", met, "1", "g.cm/s2"),
	def("erg", met, "1", "dyn.cm"), def("P", met, "1", "dyn.s/cm2"), def("Bi", met, "10", "A"),
	def("St", met, "1", "cm2/s"), def("Mx", met, "1e-8", "Wb"), def("G", met, "1e-4", "T"),
	def("Oe", met, "250", "/[pi].A/m"), def("Gb", met, "1", "Oe.cm"), def("sb", met, "1", "cd/cm2"),
	def("Lmb", met, "1", "cd/cm2/[pi]"), def("ph", met, "1e-4", "lx"), def("Ci", met, "37e9", "Bq"),
	def("R", met, "2.58e-4", "C/kg"), def("RAD", met, "100", "erg/g"), def("REM", met, "1", "RAD"),

	// International customary units.
	def("[in_i]", non, "2.54", "cm"), def("[ft_i]", non, "12", "[in_i]"), def("[yd_i]", non, "3", "[ft_i]"),
	def("[mi_i]", non, "5280", "[ft_i]"), def("[fth_i]", non, "6", "[ft_i]"), def("[nmi_i]", non, "1852", "m"),
	def("[kn_i]", non, "1", "[nmi_i]/h"), def("[sin_i]", non, "1", "[in_i]2"), def("[sft_i]", non, "1", "[ft_i]2"),
	def("[syd_i]", non, "1", "[yd_i]2"), def("[cin_i]", non, "1", "[in_i]3"), def("[cft_i]", non, "1", "[ft_i]3"),
	def("[cyd_i]", non, "1", "[yd_i]3"), def("[bf_i]", non, "144", "[in_i]3"), def("[cr_i]", non, "128", "[ft_i]3"),
	def("[mil_i]", non, "1e-3", "[in_i]"), def("[cml_i]", non, "1", "[pi]/4.[mil_i]2"), def("[hd_i]", non, "4", "[in_i]"),

	// US survey lengths.
	def("[ft_us]", non, "1200", "m/3937"), def("[yd_us]", non, "3", "[ft_us]"), def("[in_us]", non, "1", "[ft_us]/12"),
	def("[rd_us]", non, "16.5", "[ft_us]"), def("[ch_us]", non, "4", "[rd_us]"), def("[lk_us]", non, "1", "[ch_us]/100"),
	def("[rch_us]", non, "100", "[ft_us]"), def("[rlk_us]", non, "1", "[rch_us]/100"), def("[fth_us]", non, "6", "[ft_us]"),
	def("[fur_us]", non, "40", "[rd_us]"), def("[mi_us]", non, "8", "[fur_us]"), def("[acr_us]", non, "160", "[rd_us]2"),
	def("[srd_us]", non, "1", "[rd_us]2"), def("[smi_us]", non, "1", "[mi_us]2"), def("[sct]", non, "1", "[mi_us]2"),
	def("[twp]", non, "36", "[sct]"), def("[mil_us]", non, "1e-3", "[in_us]"),

	// British imperial lengths.
	def("[in_br]", non, "2.539998", "cm"), def("[ft_br]", non, "12", "[in_br]"), def("[rd_br]", non, "16.5", "[ft_br]"),
	def("[ch_br]", non, "4", "[rd_br]"), def("[lk_br]", non, "1", "[ch_br]/100"), def("[fth_br]", non, "6", "[ft_br]"),
	def("[pc_br]", non, "2.5", "[ft_br]"), def("[yd_br]", non, "3", "[ft_br]"), def("[mi_br]", non, "5280", "[ft_br]"),
	def("[nmi_br]", non, "6080", "[ft_br]"), def("[kn_br]", non, "1", "[nmi_br]/h"), def("[acr_br]", non, "4840", "[yd_br]2"),

	// US volumes.
	def("[gal_us]", non, "231", "[in_i]3"), def("[bbl_us]", non, "42", "[gal_us]"), def("[qt_us]", non, "1", "[gal_us]/4"),
	def("[pt_us]", non, "1", "[qt_us]/2"), def("[gil_us]", non, "1", "[pt_us]/4"), def("[foz_us]", non, "1", "[gil_us]/4"),
	def("[fdr_us]", non, "1", "[foz_us]/8"), def("[min_us]", non, "1", "[fdr_us]/60"), def("[crd_us]", non, "128", "[ft_i]3"),
	def("[bu_us]", non, "2150.42", "[in_i]3"), def("[gal_wi]", non, "1", "[bu_us]/8"), def("[pk_us]", non, "1", "[bu_us]/4"),
	def("[dqt_us]", non, "1", "[pk_us]/8"), def("[dpt_us]", non, "1", "[dqt_us]/2"), def("[tbs_us]", non, "1", "[foz_us]/2"),
	def("[tsp_us]", non, "1", "[tbs_us]/3"), def("[cup_us]", non, "16", "[tbs_us]"), def("[foz_m]", non, "30", "mL"),
	def("[cup_m]", non, "240", "mL"), def("[tsp_m]", non, "5", "mL"), def("[tbs_m]", non, "15", "mL"),

	// British imperial volumes.
	def("[gal_br]", non, "4.54609", "l"), def("[pk_br]", non, "2", "[gal_br]"), def("[bu_br]", non, "4", "[pk_br]"),
	def("[qt_br]", non, "1", "[gal_br]/4"), def("[pt_br]", non, "1", "[qt_br]/2"), def("[gil_br]", non, "1", "[pt_br]/4"),
	def("[foz_br]", non, "1", "[gil_br]/5"), def("[fdr_br]", non, "1", "[foz_br]/8"), def("[min_br]", non, "1", "[fdr_br]/60"),

	// Avoirdupois, troy and apothecaries' weights.
	def("[gr]", non, "64.79891", "mg"), def("[lb_av]", non, "7000", "[gr]"), def("[oz_av]", non, "1", "[lb_av]/16"),
	def("[dr_av]", non, "1", "[oz_av]/16"), def("[scwt_av]", non, "100", "[lb_av]"), def("[lcwt_av]", non, "112", "[lb_av]"),
	def("[ston_av]", non, "20", "[scwt_av]"), def("[lton_av]", non, "20", "[lcwt_av]"), def("[stone_av]", non, "14", "[lb_av]"),
	def("[pwt_tr]", non, "24", "[gr]"), def("[oz_tr]", non, "20", "[pwt_tr]"), def("[lb_tr]", non, "12", "[oz_tr]"),
	def("[sc_ap]", non, "20", "[gr]"), def("[dr_ap]", non, "3", "[sc_ap]"), def("[oz_ap]", non, "8", "[dr_ap]"),
	def("[lb_ap]", non, "12", "[oz_ap]"), def("[oz_m]", non, "28", "g"),

	// Typesetter's units.
	def("[lne]", non, "1", "[in_i]/12"), def("[pnt]", non, "1", "[lne]/6"), def("[pca]", non, "12", "[pnt]"),
	def("[pnt_pr]", non, "0.013837", "[in_i]"), def("[pca_pr]", non, "12", "[pnt_pr]"), def("[pied]", non, "32.48", "cm"),
	def("[pouce]", non, "1", "[pied]/12"), def("[ligne]", non, "1", "[pouce]/12"), def("[didot]", non, "1", "[ligne]/6"),
	def("[cicero]", non, "12", "[didot]"),

	// Heat.
	special("[degF]", spDegF), def("[degR]", non, "5", "K/9"), special("[degRe]", spDegRe),
	def("cal_[15]", met, "4.18580", "J"), def("cal_[20]", met, "4.18190", "J"), def("cal_m", met, "4.19002", "J"),
	def("cal_IT", met, "4.1868", "J"), def("cal_th", met, "4.184", "J"), def("cal", met, "1", "cal_th"),
	def("[Cal]", non, "1", "kcal_th"), def("[Btu_39]", non, "1.05967", "kJ"), def("[Btu_59]", non, "1.05480", "kJ"),
	def("[Btu_60]", non, "1.05468", "kJ"), def("[Btu_m]", non, "1.05587", "kJ"), def("[Btu_IT]", non, "1.05505585262", "kJ"),
	def("[Btu_th]", non, "1.054350", "kJ"), def("[Btu]", non, "1", "[Btu_th]"), def("[HP]", non, "550", "[ft_i].[lbf_av]/s"),
	def("tex", met, "1", "g/km"), def("[den]", non, "1", "g/9/km"),

	// Clinical and miscellaneous units.
	def("m[H2O]", met, "9.80665", "kPa"), def("m[Hg]", met, "133.3220", "kPa"),
	def("[in_i'H2O]", non, "1", "m[H2O].[in_i]/m"), def("[in_i'Hg]", non, "1", "m[Hg].[in_i]/m"),
	def("[PRU]", non, "1", "mm[Hg].s/ml"), def("[wood'U]", non, "1", "mm[Hg].min/L"),
	def("[diop]", non, "1", "/m"), def("[mesh_i]", non, "1", "/[in_i]"), def("[hnsf'U]", non, "1", "1"),
	def("[Ch]", non, "1", "mm/3"), def("[drp]", non, "1", "ml/20"), def("[MET]", non, "3.5", "mL/min/kg"),
	def("eq", met, "1", "mol"), def("osm", met, "1", "mol"), def("g%", met, "1", "g/dl"),
	def("[S]", non, "1", "10*-13.s"), def("[HPF]", non, "1", "1"), def("[LPF]", non, "100", "1"),
	def("kat", met, "1", "mol/s"), def("U", met, "1", "umol/min"),
	def("st", met, "1", "m3"), def("Ao", non, "0.1", "nm"), def("b", non, "100", "fm2"),
	def("att", non, "1", "kgf/cm2"), def("mho", met, "1", "S"), def("[psi]", non, "1", "[lbf_av]/[in_i]2"),
	def("circ", non, "2", "[pi].rad"), def("sph", non, "4", "[pi].sr"), def("[car_m]", non, "2e-1", "g"),
	def("[car_Au]", non, "1", "/24"), def("[smoot]", non, "67", "[in_i]"),
	def("bit", met, "1", "1"), def("By", met, "8", "bit"), def("Bd", met, "1", "/s"),

	// Arbitrary units: each is its own dimension.
	base("[iU]", met), def("[IU]", met, "1", "[iU]"),
	base("[arb'U]", non), base("[USP'U]", non), base("[GPL'U]", non), base("[MPL'U]", non),
	base("[APL'U]", non), base("[beth'U]", non), base("[anti'Xa'U]", non), base("[todd'U]", non),
	base("[dye'U]", non), base("[smgy'U]", non), base("[bdsk'U]", non), base("[ka'U]", non),
	base("[knk'U]", non), base("[mclg'U]", non), base("[tb'U]", non), base("[CCID_50]", non),
	base("[TCID_50]", non), base("[EID_50]", non), base("[PFU]", non), base("[FFU]", non),
	base("[CFU]", non), base("[IR]", non), base("[BAU]", non), base("[AU]", non),
	base("[Amb'a'1'U]", non), base("[PNU]", non), base("[Lf]", non), base("[D'ag'U]", non),
	base("[FEU]", non), base("[ELU]", non), base("[EU]", non),
	base("[hp_X]", non), base("[hp_C]", non), base("[hp_M]", non), base("[hp_Q]", non),
	base("[kp_X]", non), base("[kp_C]", non), base("[kp_M]", non), base("[kp_Q]", non),

	// Special (non-ratio) units recognised but not convertible.
	unsupported("[pH]", non), unsupported("Np", met), unsupported("B", met),
	unsupported("B[SPL]", met), unsupported("B[V]", met), unsupported("B[mV]", met),
	unsupported("B[uV]", met), unsupported("B[10.nV]", met), unsupported("B[W]", met),
	unsupported("B[kW]", met), unsupported("bit_s", non), unsupported("[p'diop]", non),
	unsupported("%[slope]", non), unsupported("[hp'_X]", non), unsupported("[hp'_C]", non),
	unsupported("[hp'_M]", non), unsupported("[hp'_Q]", non), unsupported("[m/s2/Hz^(1/2)]", non),
}
