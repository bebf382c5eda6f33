// Package static embeds the dashboard's assets: our own CSS and JS, and the
// third-party files (htmx and its SSE extension) that `go tool task assets`
// copies from the npm packages pinned in package.json into vendor/.
package static

import "embed"

// FS holds css/, img/, js/ and vendor/.
//
//go:embed css img js vendor
var FS embed.FS
