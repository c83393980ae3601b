// The relay a user might write instead of Dialtone: Node + ws, no auth, no seq/ack, no state.
// Each socket says who it is in the URL (?user=alice); a message {"to": "bob", ...} is
// forwarded as-is to bob's socket.
const path = require('path');
let WebSocketServer;
try { ({ WebSocketServer } = require('ws')); } catch (e) { ({ WebSocketServer } = require('/usr/share/nodejs/ws')); }
const port = parseInt(process.argv[2] || '8090', 10);
const sockets = new Map();
const wss = new WebSocketServer({ host: '127.0.0.1', port, maxPayload: 65536 });
wss.on('connection', (ws, req) => {
  const user = new URL(req.url, 'http://x').searchParams.get('user');
  sockets.set(user, ws);
  ws.on('message', (data) => {
    let msg;
    try { msg = JSON.parse(data); } catch (e) { return; }
    const peer = sockets.get(msg.to);
    if (peer) peer.send(data.toString());
  });
  ws.on('close', () => { if (sockets.get(user) === ws) sockets.delete(user); });
});
wss.on('listening', () => console.log(`node relay on ${port}`));
process.on('SIGTERM', () => process.exit(0));
