package api

// ErrorBody is OSB's error response, which every endpoint of every
// function answers with: a camel-case error code and a user-facing
// description.
type ErrorBody struct {
	Error       string `json:"error,omitempty"`
	Description string `json:"description"`
	// InstanceUsable and UpdateRepeatable are OSB's hints on a failed
	// update (they must not appear on errors of other operations).
	InstanceUsable   *bool `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool `json:"update_repeatable,omitempty"`
}

// OSBLastOperation is OSB's last_operation body, as the broker answers a
// platform that polls an instance or a binding.
type OSBLastOperation struct {
	State       OperationState `json:"state"`
	Description string         `json:"description,omitempty"`
}
