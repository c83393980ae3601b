import DialtoneNet

/// Serves the browser client (`BrowserClientPage`) at `/`.
struct BrowserClientRoutes {
  func register(in router: inout Router) {
    let page = Array(BrowserClientPage.html.utf8)
    router.add(.GET, "/") { _ in
      HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", body: page)
    }
  }
}
