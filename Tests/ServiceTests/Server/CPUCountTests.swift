import Foundation
import Glibc
import Testing
@testable import MiniHTTPServer

/// The CPUs the server sizes its loops by: a container's CPU quota and the affinity mask count,
/// not only the machine's online CPUs.
@Suite struct CPUCountTests {
    @Test(arguments: [("max 100000", nil), ("200000 100000", 2), ("150000 100000\n", 2), ("50000 100000", 1),
                      ("0 100000", nil), ("x 100000", nil), ("100000", nil), ("", nil), ("inf 1", nil)] as [(String, Int?)])
    func cpuMax(_ text: String, cpus: Int?) {
        #expect(CPUCount.cpus(fromCPUMax: text) == cpus)
    }

    @Test(arguments: [("0-3", 4), ("0", 1), ("0-1,4,6-7", 5), ("", nil), ("3-1", nil), ("a", nil), ("0-", nil)] as [(String, Int?)])
    func cpuList(_ text: String, cpus: Int?) {
        #expect(CPUCount.cpus(inList: text) == cpus)
    }

    /// The smallest quota from the process's cgroup up to the root (a pod's limit sits above its container's).
    @Test func theSmallestQuotaOnTheWayUpCounts() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cgroup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let leaf = root.appendingPathComponent("kubepods/pod1/container")
        try FileManager.default.createDirectory(at: leaf, withIntermediateDirectories: true)
        try Data("max 100000\n".utf8).write(to: leaf.appendingPathComponent("cpu.max"))
        try Data("300000 100000\n".utf8).write(to: root.appendingPathComponent("kubepods/pod1/cpu.max"))
        try Data("800000 100000\n".utf8).write(to: root.appendingPathComponent("kubepods/cpu.max"))
        let cgroup = root.appendingPathComponent("self-cgroup")
        try Data("0::/kubepods/pod1/container\n".utf8).write(to: cgroup)
        #expect(CPUCount.quota(root: root.path, cgroupFile: cgroup.path) == 3)
        try Data("0::/\n".utf8).write(to: cgroup)
        #expect(CPUCount.quota(root: root.path, cgroupFile: cgroup.path) == nil, "the root holds no cpu.max")
        try Data("12:cpu:/x\n".utf8).write(to: cgroup)
        #expect(CPUCount.quota(root: root.path, cgroupFile: cgroup.path) == nil, "cgroup v1 only: no quota read")
    }

    @Test func theUsableCountIsWithinTheOnlineCPUs() {
        let online = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        #expect((1...online).contains(CPUCount.usable()))
        #expect(CPUCount.affinity().map { (1...online).contains($0) } == true, "Linux lists the allowed CPUs")
        #expect(ServerConfiguration.defaultEventLoopCount == max(1, CPUCount.usable() / 2))
        // Under `taskset -c 0` (one CPU allowed) the count is 1 on any machine.
        let status = FileManager.default.temporaryDirectory.appendingPathComponent("status-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: status) }
        try? Data("Name:\tx\nCpus_allowed_list:\t0\nMems_allowed_list:\t0\n".utf8).write(to: status)
        #expect(CPUCount.affinity(status: status.path) == 1)
    }
}
