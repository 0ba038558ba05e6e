import Foundation
import Glibc
import Testing
@testable import DownloaderEngine

@Suite struct PressureParsersTests {
    @Test(arguments: [
        ("some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=5\n", 12.5),
        ("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 0.0),
        ("full avg10=5.00 avg60=0.00 avg300=0.00 total=0\n", nil),
        ("", nil),
    ] as [(String, Double?)])
    func psiSomeAvg10(text: String, expected: Double?) {
        #expect(PressureParsers.someAvg10(text) == expected)
    }

    @Test func memoryEvents() {
        let parsed = PressureParsers.memoryEvents("low 0\nhigh 17\nmax 3\noom 0\noom_kill 0\n")
        #expect(parsed?.high == 17 && parsed?.max == 3)
        #expect(PressureParsers.memoryEvents("low 0\n") == nil)
    }

    @Test func cgroupPaths() {
        let v2 = PressureParsers.cgroups("0::/system.slice/ds.service\n")
        #expect(v2.v2 == "/system.slice/ds.service" && v2.v1Memory == nil)
        let v1 = PressureParsers.cgroups("5:cpu,cpuacct:/\n4:memory:/docker/abc\n0::/\n")
        #expect(v1.v1Memory == "/docker/abc" && v1.v2 == "/")
    }

    /// tmpfs (as `/dev/shm` is, where it exists) keeps its files in memory; the test root does not
    /// when it is on a disk.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/dev/shm"))) func aMemoryFileSystemIsKnown() throws {
        var kind = statfs()
        try #require(statfs("/dev/shm", &kind) == 0)
        #expect(try #require(DiskSpace.of("/dev/shm")).inMemory == (kind.f_type == 0x0102_1994))
        let root = EngineFixture.root().path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try #require(statfs(root, &kind) == 0)
        #expect(try #require(DiskSpace.of(root)).inMemory == DiskSpace.memoryFileSystems.contains(Int64(kind.f_type)))
    }

    /// In a container the pressure that counts is its own cgroup's (`memory.pressure`), not the
    /// machine's: another pod's squeeze purged this one's paused partials.
    @Test func theCgroupsOwnPressureWinsOverTheMachines() throws {
        let root = EngineFixture.root()
        let (proc, cgroup) = (root.appendingPathComponent("proc"), root.appendingPathComponent("cgroup"))
        let group = cgroup.appendingPathComponent("kubepods/pod1/c")
        for dir in [proc.appendingPathComponent("self"), proc.appendingPathComponent("pressure"), group] {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        }
        func psi(_ avg10: Double) -> Data { Data("some avg10=\(avg10) avg60=0.00 avg300=0.00 total=1\n".utf8) }
        try Data("0::/kubepods/pod1/c\n".utf8).write(to: proc.appendingPathComponent("self/cgroup"))
        try psi(50).write(to: proc.appendingPathComponent("pressure/memory"))
        try psi(0).write(to: group.appendingPathComponent("memory.pressure"))
        let monitor = LinuxPressureMonitor(memoryThreshold: 10, procRoot: proc.path, cgroupRoot: cgroup.path)
        #expect(!monitor.memoryUnderPressure(), "the machine is squeezed, this group is not")
        try psi(20).write(to: group.appendingPathComponent("memory.pressure"))
        #expect(monitor.memoryUnderPressure())
        // No cgroup file to read: the machine's.
        try FileManager.default.removeItem(at: group.appendingPathComponent("memory.pressure"))
        #expect(LinuxPressureMonitor(memoryThreshold: 10, procRoot: proc.path, cgroupRoot: cgroup.path).memoryUnderPressure())
    }

    @Test func linuxMonitorReadsThisMachine() throws {
        let monitor = LinuxPressureMonitor(memoryThreshold: .infinity)
        #expect(!monitor.memoryUnderPressure())  // An infinite threshold: only cgroup events could say yes.
        let space = try #require(monitor.space(of: "/"))
        #expect(space.total > 0 && space.free >= 0 && space.free <= space.total)
        #expect(monitor.space(of: "/nonexistent/dir") == nil)
    }

    @Test func crashPointsParse() {
        #expect(CrashPoint("before-publish-rename") == .beforePublishRename)
        #expect(CrashPoint("after-publish-rename") == .afterPublishRename)
        #expect(CrashPoint("mid-state-commit:3") == .midStateCommit(3))
        #expect(CrashPoint("mid-state-commit:0") == nil && CrashPoint("mid-journal-write:3") == nil && CrashPoint("anything") == nil)
    }
}
