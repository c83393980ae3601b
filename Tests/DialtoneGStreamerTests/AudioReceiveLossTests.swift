import Testing

@testable import DialtoneGStreamer

@Suite struct AudioReceiveLossTests {
  private func received(_ sequences: [Int]) -> AudioReceiveLoss {
    var loss = AudioReceiveLoss()
    for s in sequences { loss.packet(sequence: UInt16(truncatingIfNeeded: s)) }
    return loss
  }

  @Test func theLossIsWhatNeverArrivedItself() {
    // 1000 packets from 65000 on (the numbers wrap), every tenth lost; reordered neighbours
    // and duplicates change nothing.
    var sequences = (0..<1000).filter { $0 % 10 != 5 }.map { 65_000 + $0 }
    sequences.swapAt(100, 101)
    sequences.append(sequences[300])
    let loss = received(sequences)
    #expect(loss.expected == 1000)
    #expect(loss.received == 900)
    #expect(loss.lost == 100)
  }

  @Test func randomLossHasABurstRatioOfOneAndBurstsMore() {
    // Single losses: mean burst 1 at 10 %, which random loss of 10 % gives as 1 / 0.9.
    let single = received((0..<2000).filter { $0 % 10 != 5 })
    #expect(abs((single.burstRatio ?? 0) - 1) < 0.01)
    // Bursts of 3 at the same rate: every 30th packet starts one.
    let bursty = received((0..<2000).filter { $0 % 30 >= 3 })
    #expect(abs((bursty.burstRatio ?? 0) - 2.7) < 0.05)
    #expect(bursty.lost > 190 && bursty.lost <= 200)
    #expect(received(Array(0..<500)).burstRatio == nil)
  }

  @Test func aPacketThatComesLateWithinTheWindowIsNotLost() {
    var sequences = Array(0..<200)
    let late = sequences.remove(at: 50)
    sequences.insert(late, at: 90)  // 40 packets late
    let loss = received(sequences)
    #expect(loss.lost == 0)
    #expect(loss.burstRatio == nil)
  }

  @Test func aSenderThatRestartsItsNumberingIsNotCountedAsLoss() {
    let loss = received(Array(100..<300) + Array(40_000..<40_200))
    #expect(loss.expected == 400)
    #expect(loss.lost == 0)
  }
}
