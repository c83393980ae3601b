import DialtoneNet
import DialtoneSessions

extension WebSocketConnection: SessionSocket {}
