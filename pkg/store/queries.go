package store

// The store's Firestore queries, declared as data. The Firestore emulator
// does not enforce indexes but production does, so the deployment
// (terraform/firestore.tf) derives its composite indexes from this list and
// terraform/firestore_test.go checks that every query here has its index.
// queries_test.go parses this package's source and fails when a query in
// the code is missing here (or one here is no longer in the code), so the
// list cannot drift from what the store runs.

// Query operators, spelled as the Firestore client spells them.
const (
	OpEqual = "=="
	OpLess  = "<"
	OpLE    = "<="
	OpMore  = ">"
	OpGE    = ">="
	OpNE    = "!="
	OpIn    = "in"
	OpNotIn = "not-in"
	// Array operators need an ARRAY_CONTAINS index field.
	OpArrayContains    = "array-contains"
	OpArrayContainsAny = "array-contains-any"
)

// DocumentIDField is the field path of a document's id (firestore.DocumentID).
const DocumentIDField = "__name__"

// Order directions.
const (
	Ascending  = "ASCENDING"
	Descending = "DESCENDING"
)

// Filter is one Where of a query.
type Filter struct {
	Field string
	Op    string
}

// Order is one OrderBy of a query.
type Order struct {
	Field     string
	Direction string
}

// Query is one query the store runs: the collection it reads, its filters
// and orderings in the order the code applies them, and its limit (0 for
// none; a limit needs no index).
type Query struct {
	// Func is the function whose body runs the query.
	Func       string
	Collection string
	Filters    []Filter
	OrderBy    []Order
	Limit      int
}

// VariableLimit is the Limit of a query whose limit is not a constant.
const VariableLimit = -1

// Queries is every query in this package.
var Queries = []Query{
	{Func: "OwnedSpecs", Collection: SpecsCollection,
		Filters: []Filter{{"registry", OpEqual}}},
	{Func: "MarkedSpecs", Collection: SpecsCollection,
		Filters: []Filter{{"registry", OpEqual}, {"state", OpEqual}}},
	{Func: "RegistrySpecsNamed", Collection: SpecsCollection,
		Filters: []Filter{{"registry", OpEqual}, {"name", OpEqual}}},
	{Func: "ActiveSpecsAt", Collection: SpecsCollection,
		Filters: []Filter{{"state", OpEqual}}},
	{Func: "DeleteMarked", Collection: InstancesCollection,
		Filters: []Filter{{"spec_id", OpEqual}}, Limit: 1},
	{Func: "CommitPending", Collection: ChangesCollection,
		OrderBy: []Order{{"pending_at", Ascending}}, Limit: VariableLimit},
	{Func: "AdoptLegacyPending", Collection: ChangesCollection,
		Filters: []Filter{{"pending_registry", OpEqual}}, Limit: VariableLimit},
	{Func: "ChangesAfter", Collection: ChangesCollection,
		Filters: []Filter{{"revision", OpMore}}, OrderBy: []Order{{"revision", Ascending}}, Limit: VariableLimit},
	{Func: "PruneChanges", Collection: ChangesCollection,
		Filters: []Filter{{"expires_at", OpLess}}, Limit: VariableLimit},
	{Func: "SpecInstances", Collection: InstancesCollection,
		Filters: []Filter{{"spec_id", OpEqual}}, Limit: VariableLimit},
	// A spec's usage is counted from its instances (usage.go).
	{Func: "countUsage", Collection: InstancesCollection,
		Filters: []Filter{{"spec_id", OpIn}}},
	{Func: "txStrands", Collection: InstancesCollection,
		Filters: []Filter{{"spec_id", OpEqual}}},
	{Func: "RegistryStatuses", Collection: RegistriesCollection,
		OrderBy: []Order{{DocumentIDField, Ascending}}},
	// Operator reads (admin.go): one field each, no composite index.
	{Func: "SpecsInState", Collection: SpecsCollection,
		Filters: []Filter{{"state", OpEqual}}},
	{Func: "AllSpecs", Collection: SpecsCollection,
		OrderBy: []Order{{DocumentIDField, Ascending}}},
	{Func: "RecentOperations", Collection: OperationsCollection,
		OrderBy: []Order{{"created_at", Descending}}, Limit: VariableLimit},
}
