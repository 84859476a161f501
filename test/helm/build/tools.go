//go:build tools

// The command build.sh builds; importing it keeps its module in go.mod.
package build

import _ "helm.sh/helm/v3/cmd/helm"
