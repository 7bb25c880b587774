//go:build assert

package seq

// checkPlans proves every window's plan a bijection before it runs.
const checkPlans = true
