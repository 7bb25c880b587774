//go:build !assert

package seq

const checkPlans = false
