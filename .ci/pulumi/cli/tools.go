//go:build tools

// Package tools pins the Pulumi CLI this repository's tests run (.ci/build-pulumi builds it):
// importing the command and the version package keeps both modules in go.mod and go.sum.
package tools

import (
	_ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
	_ "github.com/pulumi/pulumi/sdk/v3/go/common/version"
)
