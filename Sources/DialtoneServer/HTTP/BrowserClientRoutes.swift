import DialtoneNet

/// Serves the browser client at `/`: `Resources/softphone.html`, plain JavaScript over the
/// browser's own WebRTC, speaking docs/protocol.md (hello/welcome, seq/ack with resume, trickle
/// ICE, pending candidates, ICE restart, the call lifecycle). No build step: that file is the
/// whole client, embedded in the binary at build time.
///
/// URL fragment parameters, for demos and headless tests: `#token=T` signs in at once,
/// `call=USER` dials, `answer=auto` answers the first call, `tone=HZ` sends a sine tone instead
/// of the microphone, `hangupAfter=S` hangs up S seconds after connecting. `window.dialtoneTest`
/// exposes the call's state and the dominant frequency heard (a WebAudio analyser).
struct BrowserClientRoutes {
  let webRoot: String?

  func register(in router: inout Router) {
    let page = WebPage(fileName: "softphone.html", embedded: PackageResources.softphone_html, root: webRoot)
    router.add(.GET, "/") { _ in
      HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", body: page.body())
    }
  }
}
