import ctypes as C,os,sys,time,threading as T,statistics as S,torch,cupy,numpy
x=torch.ones(1024,device="cuda");torch.cuda.synchronize()
L=C.CDLL("libcupti.so.13",mode=os.RTLD_NOLOAD|os.RTLD_NOW)
V=C.c_void_p;Z=C.c_size_t;P=C.POINTER
R=C.CFUNCTYPE(None,P(V),P(Z),P(Z));D=C.CFUNCTYPE(None,V,C.c_uint32,V,Z,Z)
N=8<<20;pool=[C.create_string_buffer(N) for _ in range(32)];fr=[C.addressof(b) for b in pool];fl=[];lk=T.Lock()
@R
def rq(b,s,m):
 with lk:b[0]=fr.pop() if fr else None
 s[0]=N if b[0] else 0;m[0]=0
@D
def dn(c,st,b,s,v):
 if b:
  with lk:fl.append((b,v))
def sw(on,ks=(10,1,2)):
 t=time.perf_counter_ns()
 for k in ks:
  r=(L.cuptiActivityEnable if on else L.cuptiActivityDisable)(k)
  if r:print(k,on,r)
 return time.perf_counter_ns()-t
def dr():
 L.cuptiActivityFlushAll(1);c={};r=V()
 with lk:g=fl[:];fl.clear()
 for b,v in g:
  r.value=None
  while L.cuptiActivityGetNextRecord(V(b),Z(v),C.byref(r))==0:
   k=C.c_uint32.from_address(r.value).value
   if k==25:k="um%d"%C.c_uint32.from_address(r.value+4).value
   c[k]=c.get(k,0)+1
  with lk:fr.append(b)
 return c
def q(v):return "%.0f/%.0fus"%(S.median(v)/1e3,max(v)/1e3)
L.cuptiActivityRegisterCallbacks(rq,dn);v=C.c_uint32();L.cuptiGetVersion(C.byref(v));print(v.value,torch.__version__)
m=sys.argv[1]
if m=="toggle":
 a,b,on,off=[],[],[],[]
 for i in range(300):
  a.append(sw(1));t=time.perf_counter_ns()
  for _ in range(50):x.add_(1)
  on.append((time.perf_counter_ns()-t)/50);torch.cuda.synchronize()
  b.append(sw(0));t=time.perf_counter_ns()
  for _ in range(50):x.add_(1)
  off.append((time.perf_counter_ns()-t)/50);torch.cuda.synchronize()
 c=dr();print("enable",q(a));print("disable",q(b))
 print("rec",c,"of 15000")
 print("ns/launch on %.0f off %.0f"%(S.median(on),S.median(off)))
elif m=="race":
 st=T.Event();tg=[]
 def f():
  o=1
  while not st.is_set():tg.append(sw(o));o=1-o;time.sleep(.002)
  sw(0)
 sw(1);th=T.Thread(target=f);th.start();n=0;t=time.perf_counter()
 while time.perf_counter()-t<3:x.add_(1);n+=1
 st.set();th.join();torch.cuda.synchronize()
 print(n,len(tg),q(tg),dr())
else:
 class G(C.Structure):_fields_=[(f,C.c_uint32) for f in "skde"]
 g=(G*5)(*[G(1,k,0,1) for k in range(1,6)]);L.cuptiActivityConfigureUnifiedMemoryCounter(g,5)
 n=64<<20;mm=cupy.cuda.malloc_managed(n*4);d=cupy.ndarray((n,),dtype=cupy.float32,memptr=mm)
 h=numpy.ctypeslib.as_array(C.cast(mm.ptr,P(C.c_float)),(n,));h[:]=1
 def lp(k=3):
  t=time.perf_counter_ns()
  for _ in range(k):d.__iadd__(1.);cupy.cuda.Device().synchronize();h[::1024]+=1
  return "%.1fms"%((time.perf_counter_ns()-t)/k/1e6)
 print("before",lp(),dr())
 for i in range(3):
  t=sw(1,(25,));print("en %.2fms"%(t/1e6),lp(),end=" ")
  t=sw(0,(25,));print("dis %.2fms"%(t/1e6),dr(),lp(),dr())
