package web

// dashboardRoutes registers the dashboard pages, their htmx fragments and the
// live SSE stream. (Placeholder until the dashboard lands.)
func (s *Server) dashboardRoutes() {}
