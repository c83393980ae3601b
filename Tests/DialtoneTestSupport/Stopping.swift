/// Runs `body` with `resource`, then `stop`s it whether `body` threw or not: a test that fails
/// half-way leaves no server, cluster or rig running into the next one.
public func stopping<Resource: Sendable, T>(
  isolation: isolated (any Actor)? = #isolation, _ resource: Resource, stop: (Resource) async -> Void,
  _ body: (Resource) async throws -> T
) async throws -> T {
  do {
    let result = try await body(resource)
    await stop(resource)
    return result
  } catch {
    await stop(resource)
    throw error
  }
}
